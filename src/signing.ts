/**
 * Signs deliveries exactly as the service does (spec/service-api.md §6.1-6.2: sorted keys, no
 * whitespace, fresh timestamp, v2 and v1 signatures), builds them as Fetch `Request`s, fixes the
 * clock, and provides sample events: the test kit of `svc-webhooks/testing` (src/testing.ts), also
 * used by the CLI and the service emulator. Runtime-neutral: no `node:` import.
 */
import { hmacHex, importSecret } from '#crypto'
import type { MessageReceivedEvent, WebhookEventMap } from './events.js'
import { HEADER_EVENT, HEADER_ID, HEADER_SIGNATURE_V1, HEADER_SIGNATURE_V2, HEADER_TIMESTAMP } from './headers.js'

/** Options of {@link signWebhook}. Give `event` (serialized like the service) or the exact `body`. */
export interface SignWebhookOptions {
  /** The endpoint's signing secret. */
  secret: string
  /** An event object, serialized with sorted keys and no whitespace, as the service does. */
  event?: object
  /** The exact body bytes or text to sign (takes precedence over `event`). */
  body?: string | Uint8Array
  /**
   * The delivery id.
   * @default crypto.randomUUID()
   */
  id?: string
  /**
   * Unix seconds of the attempt.
   * @default now
   */
  timestamp?: number
  /**
   * Which signature headers to send. The service sends both.
   * @default ['v2', 'v1']
   */
  schemes?: readonly ('v2' | 'v1')[]
  /**
   * The clock, in milliseconds since the epoch, used when `timestamp` is not given.
   * @default Date.now
   */
  now?: () => number
}

/** A signed delivery: the headers and bytes the service would send. */
export interface SignedWebhook {
  id: string
  timestamp: number
  /** The body as text (UTF-8). */
  body: string
  /** The body as bytes: exactly what was signed. */
  rawBody: Uint8Array
  /**
   * `content-type`, `svc-webhook-id`, `-event`, `-timestamp`, `-signature-v2`, `-signature`: a
   * plain object, ready for supertest (`.set(headers).send(body)`) and light-my-request /
   * Fastify's `inject({ method: 'POST', url, headers, payload: body })`.
   */
  headers: Record<string, string>
}

const encoder = /* @__PURE__ */ new TextEncoder()
const decoder = /* @__PURE__ */ new TextDecoder()

/**
 * Serializes an event as the service does: keys sorted at every level, no whitespace, non-ASCII
 * characters kept as UTF-8.
 *
 * @example
 * serializeEvent({ b: 1, a: { d: 2, c: 3 } }) // '{"a":{"c":3,"d":2},"b":1}'
 */
export function serializeEvent(event: unknown): string {
  return JSON.stringify(event, (_key, value: unknown) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
    const sorted: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) sorted[key] = (value as Record<string, unknown>)[key]
    return sorted
  })
}

/** The lowercase hex HMAC-SHA256 signature of `prefix || body` (without the `v2=` / `v1=` label). */
export async function computeSignature(secret: string, prefix: string, body: Uint8Array): Promise<string> {
  return hmacHex(importSecret(secret), prefix, body)
}

/**
 * Signs a delivery the way the service does, for tests of your receiver.
 *
 * @example
 * const { body, headers } = await signWebhook({ secret, event: sampleEvent('message.received') })
 * await fetch('http://127.0.0.1:3000/webhooks/svc', { method: 'POST', headers, body })
 */
export async function signWebhook(options: SignWebhookOptions): Promise<SignedWebhook> {
  const { secret, event, id = crypto.randomUUID(), schemes = ['v2', 'v1'], now = Date.now } = options
  if (typeof secret !== 'string' || secret.length === 0) throw new TypeError('svc-webhooks: signWebhook needs a secret.')
  const timestamp = options.timestamp ?? Math.floor(now() / 1000)
  const source = options.body ?? (event === undefined ? undefined : serializeEvent(event))
  if (source === undefined) throw new TypeError('svc-webhooks: signWebhook needs `event` or `body`.')
  const rawBody = typeof source === 'string' ? encoder.encode(source) : source
  const body = typeof source === 'string' ? source : decoder.decode(source)
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    [HEADER_ID]: id,
    [HEADER_TIMESTAMP]: String(timestamp),
  }
  const type = (event as { event?: unknown } | undefined)?.event ?? eventTypeOf(body)
  if (typeof type === 'string') headers[HEADER_EVENT] = type
  if (schemes.includes('v2')) headers[HEADER_SIGNATURE_V2] = `v2=${await computeSignature(secret, `${id}.${timestamp}.`, rawBody)}`
  if (schemes.includes('v1')) headers[HEADER_SIGNATURE_V1] = `v1=${await computeSignature(secret, `${timestamp}.`, rawBody)}`
  return { id, timestamp, body, rawBody, headers }
}

function eventTypeOf(body: string): unknown {
  try {
    return (JSON.parse(body) as { event?: unknown })?.event
  } catch {
    return undefined
  }
}

/** One sample payload per event type, as the service sends them. */
export const sampleEvents: { readonly [K in keyof WebhookEventMap]: WebhookEventMap[K] } = {
  'message.received': {
    event: 'message.received',
    business_id: '3f0c2a4e-8b1d-4c6a-9e2f-5a7b8c9d0e1f',
    conversation_id: '9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b',
    message: {
      id: 'c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f',
      chat_id: '9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b',
      text: 'Hola, ¿tienen mesa para dos a las 20:00? 🍝',
      from: '+34600000000',
      sender_type: 'customer',
      created_at: '2026-11-22T10:15:30.123456+00:00',
    },
  } satisfies MessageReceivedEvent,
}

/**
 * A fresh sample event of `type` (a deep copy), with top-level fields overridden.
 *
 * @example
 * const event = sampleEvent('message.received', { business_id: myBusinessId })
 */
export function sampleEvent<K extends keyof WebhookEventMap>(
  type: K,
  overrides: Partial<WebhookEventMap[K]> = {},
): WebhookEventMap[K] {
  return { ...(JSON.parse(JSON.stringify(sampleEvents[type])) as WebhookEventMap[K]), ...overrides }
}

/** Options of {@link createSignedRequest}: those of {@link signWebhook} plus where to send it. */
export interface SignedRequestOptions extends SignWebhookOptions {
  /**
   * The request URL. Only its path matters to in-process handlers (Hono `app.request`, Next).
   * @default 'http://127.0.0.1/webhooks/svc'
   */
  url?: string | URL
  /**
   * Extra headers, set after the signed ones (e.g. to drop or damage one: `{ 'svc-webhook-signature-v2': '' }`).
   */
  headers?: Record<string, string>
}

/**
 * A signed delivery as a Fetch `Request`, for handlers that take one: Hono's `app.request`, a
 * Next.js route handler, a Worker's `fetch`, `createFetchHandler`.
 *
 * @example
 * const request = await createSignedRequest({ secret, event: sampleEvent('message.received') })
 * const response = await app.request(request) // Hono; or: await POST(request) in Next.js
 * expect(response.status).toBe(200)
 */
export async function createSignedRequest(options: SignedRequestOptions): Promise<Request> {
  const { url = 'http://127.0.0.1/webhooks/svc', headers: extra, ...signOptions } = options
  const signed = await signWebhook(signOptions)
  return new Request(url, {
    method: 'POST',
    headers: { ...signed.headers, ...extra },
    body: signed.rawBody as BodyInit,
  })
}

/** A clock frozen at a Unix time, in the shape of the `now` option (milliseconds since the epoch). */
export interface FixedClock {
  (): number
  /** Unix seconds the clock shows. */
  readonly seconds: number
  /** Moves the clock by `seconds` (negative goes back). */
  advance(seconds: number): void
  /** Sets the clock to `unixSeconds`. */
  set(unixSeconds: number): void
}

/**
 * A clock that stays where you put it: pass the same one as `now` to the receiver (or
 * `verifyWebhook`) and to `signWebhook`, then move it to test the timestamp tolerance.
 *
 * @example
 * const clock = fixedClock(1_767_225_600)
 * const receiver = createWebhookReceiver({ secret, on, now: clock })
 * const signed = await signWebhook({ secret, event: sampleEvent('message.received'), now: clock })
 * clock.advance(301) // the same delivery is now 401 timestamp_too_old
 */
export function fixedClock(unixSeconds: number): FixedClock {
  const check = (value: number): number => {
    if (!Number.isFinite(value)) throw new TypeError('svc-webhooks: fixedClock takes Unix time in seconds.')
    return value
  }
  let seconds = check(unixSeconds)
  const clock = (() => seconds * 1000) as FixedClock
  Object.defineProperty(clock, 'seconds', { get: () => seconds, enumerable: true })
  clock.advance = (delta) => {
    seconds = check(seconds + delta)
  }
  clock.set = (value) => {
    seconds = check(value)
  }
  return clock
}
