/**
 * The framework-neutral receiver: verify, claim the delivery id, run the handler, complete or
 * release, and answer with the status that keeps the sender's retry promise (DESIGN.md answers
 * table; spec/service-api.md §6.3: 5xx and 429 are retried, every other 4xx is permanent).
 */
import { isWebhookVerificationError, type WebhookErrorCode } from './errors.js'
import type { WebhookEventMap } from './events.js'
import type { WebhookInput } from './input.js'
import { resolveVerifyOptions, type VerifyOptions } from './options.js'
import { MemoryStore } from './stores/memory.js'
import type { IdempotencyStore } from './stores/store.js'
import { verifyWebhook, type VerifiedDelivery } from './verify.js'

/** A handler for one event type: the typed event first, the verified delivery second. */
export type WebhookHandler<E = WebhookEventMap[keyof WebhookEventMap]> = (
  event: E,
  delivery: VerifiedDelivery<E>,
) => unknown

/** Handlers by event type. A type with no handler is answered 2xx and ignored (the catalog grows). */
export type WebhookHandlers = { [K in keyof WebhookEventMap]?: WebhookHandler<WebhookEventMap[K]> }

/** How a delivery ended, as reported to `onResult`. */
export type WebhookOutcome =
  | 'processed'
  | 'duplicate'
  | 'ignored'
  | 'in_flight'
  | 'handler_failed'
  | 'store_unavailable'
  | 'refused'
  | 'method_not_allowed'

/** The `code` in an answer's JSON body. */
export type WebhookAnswerCode = WebhookErrorCode | Exclude<WebhookOutcome, 'processed' | 'refused'> | 'internal_error'

/** One delivery's result, for logging and metrics. Never holds the body or a secret. */
export interface WebhookResult {
  outcome: WebhookOutcome
  status: number
  /** The refusal or answer code, when not `processed`. */
  code?: WebhookAnswerCode
  /** The delivery id, once verified. */
  id?: string
  /** The event type from the signed body, once verified. */
  eventType?: string
  signatureVersion?: 'v2' | 'v1'
  /**
   * The handler's or the store's error, or the verification error. With outcome `processed`: the
   * completion could not be recorded, or the handler outlasted `leaseMs` (another request may have run it too).
   */
  error?: unknown
  durationMs: number
}

/** Options of {@link createWebhookReceiver}: verification options plus handlers and dedupe. */
export interface WebhookReceiverOptions extends VerifyOptions {
  /** Handlers by event type, called as `handler(event, delivery)`. */
  on: WebhookHandlers
  /**
   * Where processed delivery ids are kept. Use `RedisStore` when several processes receive.
   * @default new MemoryStore()
   */
  store?: IdempotencyStore
  /**
   * Namespace of the dedupe keys, so two endpoints sharing a store never collide.
   * @default 'default'
   */
  endpoint?: string
  /**
   * How long a claim holds an id while its handler runs. Longer than the sender's 10 s timeout, so
   * its retry finds the claim and gets 429; a crashed process frees the id after this long.
   * @default 60000
   */
  leaseMs?: number
  /**
   * How long a processed id is remembered, in milliseconds.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * `Retry-After` seconds sent with 429 (in flight) and 503 (store unavailable).
   * @default 5
   */
  retryAfterSeconds?: number
  /** Called once per request with its result: the logging and metrics hook. Must not throw. */
  onResult?: (result: WebhookResult) => void
}

/** A request as the receiver sees it. `method`, when given, must be POST. */
export interface WebhookRequest extends WebhookInput {
  method?: string
}

/** The answer to send: adapters copy it to their framework's response as is. */
export interface WebhookResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** A receiver: `handle` is the whole flow. */
export interface WebhookReceiver {
  handle(request: WebhookRequest): Promise<WebhookResponse>
  /** The receiver's options after validation. */
  readonly options: Readonly<WebhookReceiverOptions>
}

const DEFAULT_LEASE_MS = 60_000
const DEFAULT_RETENTION_MS = 72 * 60 * 60 * 1000

function positive(value: unknown, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`svc-webhooks: \`${name}\` must be a positive number.`)
  }
}

const JSON_HEADERS = { 'content-type': 'application/json' }

function answer(status: number, body: object, extra?: Record<string, string>): WebhookResponse {
  return { status, headers: extra ? { ...JSON_HEADERS, ...extra } : { ...JSON_HEADERS }, body: JSON.stringify(body) }
}

/**
 * Turns any error thrown while receiving into the answer: a verification error's own status
 * and code, anything else 500 `internal_error` (retried by the sender). Adapters use it for
 * errors they meet before `handle`, such as an oversize body while streaming.
 *
 * @example
 * const res = errorResponse(err) // { status: 413, body: '{"ok":false,"code":"body_too_large"}' }
 */
export function errorResponse(error: unknown): WebhookResponse {
  if (isWebhookVerificationError(error)) return answer(error.status, { ok: false, code: error.code })
  return answer(500, { ok: false, code: 'internal_error' })
}

/**
 * Creates a receiver: verification, exactly-once processing and the answers table in one
 * framework-neutral `handle`. Invalid options throw here, not on the first request.
 *
 * @example
 * const receiver = createWebhookReceiver({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 * const { status, headers, body } = await receiver.handle({ method: 'POST', body: rawBytes, headers: reqHeaders })
 */
export function createWebhookReceiver(options: WebhookReceiverOptions): WebhookReceiver {
  resolveVerifyOptions(options)
  const {
    on,
    store = new MemoryStore(),
    endpoint = 'default',
    leaseMs = DEFAULT_LEASE_MS,
    retentionMs = DEFAULT_RETENTION_MS,
    retryAfterSeconds = 5,
    onResult,
  } = options
  if (typeof on !== 'object' || on === null) {
    throw new TypeError('svc-webhooks: `on` must map event types to handlers, e.g. { "message.received": async (event) => {} }.')
  }
  for (const [type, handler] of Object.entries(on)) {
    if (typeof handler !== 'function') throw new TypeError(`svc-webhooks: the handler for "${type}" is not a function.`)
  }
  if (typeof store?.claim !== 'function' || typeof store.complete !== 'function' || typeof store.release !== 'function') {
    throw new TypeError('svc-webhooks: `store` must implement claim, complete and release (IdempotencyStore).')
  }
  if (typeof endpoint !== 'string' || endpoint.length === 0) {
    throw new TypeError('svc-webhooks: `endpoint` must be a non-empty string.')
  }
  positive(leaseMs, 'leaseMs')
  positive(retentionMs, 'retentionMs')
  positive(retryAfterSeconds, 'retryAfterSeconds')
  const handlers = on as Record<string, WebhookHandler<unknown> | undefined>
  const retryAfter = { 'retry-after': String(Math.ceil(retryAfterSeconds)) }
  const now = options.now ?? Date.now

  async function run(request: WebhookRequest, result: WebhookResult): Promise<WebhookResponse> {
    if (request.method !== undefined && request.method.toUpperCase() !== 'POST') {
      result.outcome = 'method_not_allowed'
      result.code = 'method_not_allowed'
      return answer(405, { ok: false, code: 'method_not_allowed' }, { allow: 'POST' })
    }
    let delivery: VerifiedDelivery
    try {
      delivery = await verifyWebhook(request, options)
    } catch (error) {
      result.outcome = 'refused'
      result.error = error
      if (isWebhookVerificationError(error)) result.code = error.code
      else result.code = 'internal_error'
      return errorResponse(error)
    }
    const type = delivery.event.event
    result.id = delivery.id
    result.eventType = type
    result.signatureVersion = delivery.signatureVersion
    const handler = Object.hasOwn(handlers, type) ? handlers[type] : undefined
    if (handler === undefined) {
      result.outcome = 'ignored'
      result.code = 'ignored'
      return answer(200, { ok: true, ignored: true })
    }

    // A v1 signature does not cover the id, so the id cannot be trusted as a dedupe key (spec §6.2).
    if (delivery.signatureVersion === 'v1') return runHandler(handler, delivery, result)

    const key = `${endpoint}:${delivery.id}`
    const owner = crypto.randomUUID()
    let claim
    try {
      claim = await store.claim(key, owner, leaseMs)
    } catch (error) {
      result.outcome = 'store_unavailable'
      result.code = 'store_unavailable'
      result.error = error
      return answer(503, { ok: false, code: 'store_unavailable' }, retryAfter)
    }
    if (claim === 'completed') {
      result.outcome = 'duplicate'
      result.code = 'duplicate'
      return answer(200, { ok: true, duplicate: true })
    }
    if (claim === 'in_flight') {
      // Never 409: the sender treats it as permanent and would drop a delivery still being processed.
      result.outcome = 'in_flight'
      result.code = 'in_flight'
      return answer(429, { ok: false, code: 'in_flight' }, retryAfter)
    }
    const response = await runHandler(handler, delivery, result)
    if (result.outcome === 'processed') {
      // The handler's work is done: answer 2xx even if recording it fails, and report the failure.
      const owned = await store.complete(key, owner, retentionMs).catch((error: unknown) => {
        result.error = error
      })
      if (owned === false) {
        // The lease ran out while the handler ran, so another request may have run it too (issue 4).
        result.error = new Error('svc-webhooks: the handler outlasted `leaseMs`; another request may also have run it. Raise `leaseMs` or make the handler idempotent.')
      }
    } else {
      // If this fails too, the lease expires and the retry runs the handler then.
      await store.release(key, owner).catch(() => undefined)
    }
    return response
  }

  async function runHandler(
    handler: WebhookHandler<unknown>,
    delivery: VerifiedDelivery,
    result: WebhookResult,
  ): Promise<WebhookResponse> {
    try {
      await handler(delivery.event, delivery as VerifiedDelivery<unknown>)
    } catch (error) {
      result.outcome = 'handler_failed'
      result.code = 'handler_failed'
      result.error = error
      return answer(500, { ok: false, code: 'handler_failed' })
    }
    result.outcome = 'processed'
    return answer(200, { ok: true })
  }

  return {
    options,
    async handle(request) {
      const started = now()
      const result: WebhookResult = { outcome: 'processed', status: 0, durationMs: 0 }
      let response: WebhookResponse
      try {
        response = await run(request, result)
      } catch (error) {
        result.outcome = 'refused'
        result.code = 'internal_error'
        result.error = error
        response = errorResponse(error)
      }
      result.status = response.status
      result.durationMs = now() - started
      if (onResult) {
        try {
          onResult(result)
        } catch {
          // A logging hook must not turn a processed delivery into a failure.
        }
      }
      return response
    },
  }
}
