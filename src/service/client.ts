/**
 * The service's webhook-endpoint API as typed calls (spec/service-api.md §4.1): bearer token (§5),
 * the `business-id` header, §7 errors as one {@link ServiceApiError}, a timeout per call, and
 * retries with bounded exponential backoff and jitter for 5xx, 429 and network errors, never for
 * another 4xx. The token never reaches an error, its `cause`, or the `onAttempt` hook.
 */
import type { CreateEndpointInput, ServiceClient, UpdateEndpointInput, ValidationIssue, WebhookEndpoint } from './types.js'

/** Options of {@link createServiceClient}. */
export interface ServiceClientOptions {
  /** The service's `{base_url}` (spec: no host is named). `/api/v1` is added unless already there. */
  baseUrl: string | URL
  /** A personal access token (`svc_pat_...`) or another bearer token (§5), read from the environment. Never logged. */
  token: string
  /** The business the calls act for, sent as the `business-id` header. */
  businessId: string
  /**
   * Milliseconds one attempt may take, answer body included.
   * @default 10000
   */
  timeoutMs?: number
  /**
   * Retries after the first attempt, for the failures that may pass (5xx, 429, network, timeout).
   * @default 3
   */
  retries?: number
  /**
   * The first backoff, in milliseconds; doubled each retry, with jitter.
   * @default 500
   */
  retryBaseMs?: number
  /**
   * The longest wait before a retry, in milliseconds. A `Retry-After` longer than this is not
   * waited for: the call fails with `retryAfterMs` set, for the caller to decide.
   * @default 10000
   */
  retryMaxMs?: number
  /**
   * The fetch to use.
   * @default globalThis.fetch
   */
  fetch?: typeof fetch
  /**
   * Waits between attempts (tests pass one that does not wait).
   * @default setTimeout
   */
  sleep?: (ms: number) => Promise<void>
  /**
   * The clock, for a `Retry-After` given as an HTTP date.
   * @default Date.now
   */
  now?: () => number
  /** Called after each attempt (the CLI's `--verbose`). It never sees the token or a body. */
  onAttempt?: (attempt: ServiceAttempt) => void
}

/** One HTTP attempt, as {@link ServiceClientOptions.onAttempt} sees it. */
export interface ServiceAttempt {
  method: string
  /** The path under the base URL, e.g. `/api/v1/webhook-endpoints`. */
  path: string
  /** 1 for the first attempt. */
  attempt: number
  /** The answer's status; absent when none came. */
  status?: number
  /** Why no answer came (`timeout`, `ECONNREFUSED`, ...). */
  error?: string
  ms: number
  /** The wait before the next attempt, when there is one. */
  retryInMs?: number
}

/**
 * Fallback codes when the answer carries none, plus the client's own: `network_error` (no
 * answer; the request never reached the service), `timeout`, `outcome_unknown` (a call that
 * must not be repeated blindly lost its answer), `invalid_response` (a 2xx that is not the JSON
 * expected). The service's own codes (`plan_limit_event_webhooks`, ...) pass through as given.
 */
export type ServiceApiErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'validation_error'
  | 'rate_limited'
  | 'server_error'
  | 'http_error'
  | 'network_error'
  | 'timeout'
  | 'outcome_unknown'
  | 'invalid_response'
  | 'plan_limit_event_webhooks'
  | (string & {})

const BRAND = Symbol.for('svc-webhooks.ServiceApiError')

/**
 * A call to the service failed (spec §7). Branch on `code` and `status`; `retryable` says whether
 * the same call may pass later (5xx, 429, network, timeout, `outcome_unknown`).
 *
 * @example
 * try {
 *   await service.endpoints.create({ label: 'shop', url, subscribed_events: [] })
 * } catch (err) {
 *   if (isServiceApiError(err) && err.code === 'plan_limit_event_webhooks') console.error('upgrade the plan')
 *   else throw err
 * }
 */
export class ServiceApiError extends Error {
  override readonly name = 'ServiceApiError'
  /** The HTTP status, or 0 when no answer came. */
  readonly status: number
  readonly code: ServiceApiErrorCode
  /** The service's `detail`; for a 422, its list joined as `loc: msg; ...`. */
  readonly detail: string
  /** The 422 validation list as the service sent it. */
  readonly errors?: ValidationIssue[]
  readonly retryable: boolean
  /** The `Retry-After` the service asked for, in milliseconds, when it was longer than the client waits. */
  readonly retryAfterMs?: number

  constructor(
    message: string,
    fields: { status: number; code: ServiceApiErrorCode; detail: string; retryable: boolean; errors?: ValidationIssue[]; retryAfterMs?: number; cause?: unknown },
  ) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause })
    this.status = fields.status
    this.code = fields.code
    this.detail = fields.detail
    this.retryable = fields.retryable
    if (fields.errors !== undefined) this.errors = fields.errors
    if (fields.retryAfterMs !== undefined) this.retryAfterMs = fields.retryAfterMs
    Object.defineProperty(this, BRAND, { value: true })
  }

  /** The fields, for `JSON.stringify` and log pipelines. */
  toJSON(): Record<string, unknown> {
    return { name: this.name, message: this.message, status: this.status, code: this.code, detail: this.detail, retryable: this.retryable, errors: this.errors, retryAfterMs: this.retryAfterMs }
  }
}

/**
 * True for a {@link ServiceApiError}, also one from another copy of this package.
 *
 * @example
 * if (isServiceApiError(err) && err.retryable) scheduleAgain()
 */
export function isServiceApiError(value: unknown): value is ServiceApiError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true
}

const FALLBACK_CODE: Record<number, ServiceApiErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  422: 'validation_error',
  429: 'rate_limited',
}

/** What to do about a status, for the message. */
const HINT: Record<number, string> = {
  401: 'the token was not accepted: check SVC_API_TOKEN (a personal access token, svc_pat_...; not shown here).',
  403: 'the token may not do this for this business.',
  404: 'the endpoint, the delivery or the business (business-id) does not exist.',
}

/** How a call may be repeated when its answer is lost or says "try again". */
type Retry = 'idempotent' | 'once'

interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  body?: unknown
  retry: Retry
  /** A 404 on a retry means an earlier attempt did it (DELETE). */
  goneIsDone?: boolean
  /** This call's own per-attempt timeout, instead of the client's. */
  timeoutMs?: number
  /** Retried only where the service provably did not act: a refused connection, an unknown host, 429 (`create`). */
  strict?: boolean
}

/**
 * A client for the service's webhook-endpoint API.
 *
 * Retries: `list`, `update`, `enable`, `disable` and `remove` are retried on 5xx, 429, timeouts
 * and network errors (a `remove` retried after a lost answer treats 404 as done). `resend` is
 * retried the same way: a second resend delivers the same id, which a receiver deduplicates
 * (spec §6.2). `create` is retried only where the service provably did not act: the connection
 * was refused or the name did not resolve, or it answered 429 (a 503 may come from a gateway after
 * the backend created the endpoint, and a second create is a second endpoint: every event twice).
 * `rotateSecret` is retried on those and on a 503 with `Retry-After` (one more rotation is
 * harmless: the last answer holds the secret); a refusal after such a retry is `outcome_unknown`,
 * since the first attempt may have rotated. When their answer is lost (a timeout, a reset
 * connection), they fail with code `outcome_unknown` (`retryable: true`): the endpoint may exist,
 * the secret may have changed, and the new secret exists only in the lost answer, so the caller
 * rotates (or lists) again knowingly. Another 5xx to them fails with its status, `retryable: true`.
 *
 * @example
 * import { createServiceClient } from 'svc-webhooks/service'
 *
 * const service = createServiceClient({
 *   baseUrl: process.env.SVC_API_URL!,
 *   token: process.env.SVC_API_TOKEN!,
 *   businessId: process.env.SVC_BUSINESS_ID!,
 * })
 * for (const endpoint of await service.endpoints.list()) console.log(endpoint.id, endpoint.enabled)
 */
export function createServiceClient(options: ServiceClientOptions): ServiceClient {
  if (typeof options !== 'object' || options === null) throw new TypeError('svc-webhooks: createServiceClient needs { baseUrl, token, businessId }.')
  const {
    token,
    businessId,
    timeoutMs = 10_000,
    retries = 3,
    retryBaseMs = 500,
    retryMaxMs = 10_000,
    fetch: fetchImpl = globalThis.fetch,
    sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms)),
    now = Date.now,
    onAttempt,
  } = options
  const api = apiRoot(options.baseUrl)
  if (typeof token !== 'string' || token.trim() === '') {
    throw new TypeError('svc-webhooks: `token` must be a non-empty string: a personal access token (svc_pat_...) read from the environment, e.g. process.env.SVC_API_TOKEN.')
  }
  if (/\s/.test(token)) throw new TypeError('svc-webhooks: `token` has whitespace in it (often a newline copied with it); remove it. (The token is not shown.)')
  if (typeof businessId !== 'string' || businessId.trim() === '') throw new TypeError('svc-webhooks: `businessId` must be the business UUID the calls act for (sent as the business-id header).')
  const positive = (value: unknown, name: string, min: number) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min) throw new TypeError(`svc-webhooks: \`${name}\` must be a number of at least ${min}.`)
  }
  positive(timeoutMs, 'timeoutMs', 1)
  positive(retryBaseMs, 'retryBaseMs', 0)
  positive(retryMaxMs, 'retryMaxMs', 0)
  if (!Number.isInteger(retries) || retries < 0 || retries > 10) throw new TypeError('svc-webhooks: `retries` must be a whole number from 0 to 10.')
  if (typeof fetchImpl !== 'function') throw new TypeError('svc-webhooks: no `fetch`: pass one as `fetch` (Node.js >= 20 has it built in).')
  if (onAttempt !== undefined && typeof onAttempt !== 'function') throw new TypeError('svc-webhooks: `onAttempt` must be a function.')

  const redact = (text: string) => text.split(token).join('[token]')
  const headers = (body: boolean): Record<string, string> => ({
    authorization: `Bearer ${token}`,
    'business-id': businessId,
    accept: 'application/json',
    ...(body ? { 'content-type': 'application/json' } : {}),
  })

  /** The wait before retry number `n` (1-based): exponential, capped, with jitter (half fixed, half random). */
  const backoff = (n: number) => {
    const ceiling = Math.min(retryMaxMs, retryBaseMs * 2 ** (n - 1))
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2)
  }

  async function request<T>(call: Call): Promise<T> {
    const { method, path, body, retry } = call
    const what = `${method} ${path}`
    const attemptMs = call.timeoutMs ?? timeoutMs
    let lostEarlier = false
    // An earlier attempt of a call that is not safe to repeat may have acted: a later refusal does not undo it.
    let mayHaveActed: string | undefined
    for (let attempt = 1; ; attempt++) {
      const started = Date.now()
      const report = (fields: Partial<ServiceAttempt>) => {
        if (onAttempt) {
          try {
            onAttempt({ method, path, attempt, ms: Date.now() - started, ...fields })
          } catch {
            // A logging hook never changes a call's outcome.
          }
        }
      }
      const canRetry = attempt <= retries
      let response: Response
      let text: string
      try {
        response = await fetchImpl(`${api}${path.slice('/api/v1'.length)}`, {
          method,
          headers: headers(body !== undefined),
          body: body === undefined ? undefined : JSON.stringify(body),
          redirect: 'manual',
          signal: AbortSignal.timeout(attemptMs),
        })
        text = await response.text()
      } catch (error) {
        const failure = describeFailure(error, attemptMs)
        // A refused connection or an unknown host never reached the service: safe to repeat any call.
        const safe = retry === 'idempotent' || failure.unsent
        const wait = canRetry && safe ? backoff(attempt) : undefined
        report({ error: failure.code, ...(wait === undefined ? {} : { retryInMs: wait }) })
        if (wait !== undefined) {
          if (!failure.unsent) lostEarlier = true
          if (!failure.unsent && retry === 'once') mayHaveActed = failure.code
          await sleep(wait)
          continue
        }
        const cause = sanitizedCause(error, redact)
        if (!safe) {
          throw new ServiceApiError(`svc-webhooks: ${what}: the answer was lost (${failure.code}); the service may or may not have acted. Check, then call again knowingly${path.endsWith('/rotate-secret') ? ' (rotate again: the new secret was only in the lost answer)' : ''}.`, {
            status: 0,
            code: 'outcome_unknown',
            detail: failure.meaning,
            retryable: true,
            cause,
          })
        }
        throw new ServiceApiError(`svc-webhooks: ${what}: ${failure.meaning}${attempt > 1 ? ` (after ${attempt} attempts)` : ''}.`, {
          status: 0,
          code: failure.code === 'timeout' ? 'timeout' : 'network_error',
          detail: failure.meaning,
          retryable: true,
          cause,
        })
      }

      const { status } = response
      if (status >= 200 && status < 300) {
        report({ status })
        if (status === 204 || text === '') return undefined as T
        try {
          return JSON.parse(text) as T
        } catch {
          throw new ServiceApiError(`svc-webhooks: ${what}: the service answered ${status} with a body that is not JSON.`, { status, code: 'invalid_response', detail: 'not JSON', retryable: false })
        }
      }
      if (status === 404 && call.goneIsDone && lostEarlier) {
        report({ status })
        return undefined as T
      }

      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), now())
      const transient = status >= 500 || status === 429
      // 429 is a rate limit, answered before anything is done. A 503 with Retry-After usually says
      // the same, but a gateway may answer it after the backend acted: a repeated rotation is then
      // only one more rotation (the last answer is the secret), a repeated create a second endpoint.
      const declined = status === 429 || (status === 503 && retryAfterMs !== undefined && !call.strict)
      const safe = transient && (retry === 'idempotent' || declined)
      const tooLong = retryAfterMs !== undefined && retryAfterMs > retryMaxMs
      const wait = canRetry && safe && !tooLong ? (retryAfterMs ?? backoff(attempt)) : undefined
      report({ status, ...(wait === undefined ? {} : { retryInMs: wait }) })
      if (wait !== undefined) {
        if (retry === 'once' && status !== 429) mayHaveActed = `${status}`
        await sleep(wait)
        continue
      }
      const error = errorFromAnswer(what, status, text, { retryable: transient, retryAfterMs: tooLong ? retryAfterMs : undefined, attempts: attempt, redact })
      if (mayHaveActed !== undefined && !transient) {
        throw new ServiceApiError(`svc-webhooks: ${what}: an earlier attempt was answered ${mayHaveActed} and may have acted; this one was refused (${status} ${error.code}). The outcome is unknown.`, {
          status,
          code: 'outcome_unknown',
          detail: error.detail,
          retryable: true,
          cause: error,
        })
      }
      throw error
    }
  }

  const id = (value: unknown, name: string): string => {
    if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`svc-webhooks: \`${name}\` must be a non-empty string (a UUID).`)
    return encodeURIComponent(value)
  }
  const endpoint = (endpointId: string) => `/api/v1/webhook-endpoints/${id(endpointId, 'endpointId')}`
  const callTimeout = (options: { timeoutMs?: number } | undefined): number | undefined => {
    const ms = options?.timeoutMs
    if (ms !== undefined) positive(ms, 'timeoutMs', 1)
    return ms
  }

  const withSecret = (what: string, answer: WebhookEndpoint): WebhookEndpoint & { signing_secret: string } => {
    if (typeof answer?.signing_secret !== 'string' || answer.signing_secret === '') {
      throw new ServiceApiError(`svc-webhooks: ${what}: the answer has no signing_secret.`, { status: 200, code: 'invalid_response', detail: 'no signing_secret', retryable: false })
    }
    return answer as WebhookEndpoint & { signing_secret: string }
  }

  return {
    endpoints: {
      async list() {
        const answer = await request<unknown>({ method: 'GET', path: '/api/v1/webhook-endpoints', retry: 'idempotent' })
        if (!Array.isArray(answer)) throw new ServiceApiError('svc-webhooks: GET /api/v1/webhook-endpoints: the answer is not a list.', { status: 200, code: 'invalid_response', detail: 'not a list', retryable: false })
        return answer as WebhookEndpoint[]
      },
      async create(input: CreateEndpointInput, options?: { timeoutMs?: number }) {
        if (typeof input !== 'object' || input === null) throw new TypeError('svc-webhooks: endpoints.create needs { label, url, subscribed_events }.')
        const answer = await request<WebhookEndpoint>({ method: 'POST', path: '/api/v1/webhook-endpoints', body: input, retry: 'once', strict: true, timeoutMs: callTimeout(options) })
        return withSecret('POST /api/v1/webhook-endpoints', answer)
      },
      update(endpointId: string, input: UpdateEndpointInput) {
        if (typeof input !== 'object' || input === null) throw new TypeError('svc-webhooks: endpoints.update needs an object of the fields to change.')
        return request<WebhookEndpoint>({ method: 'PATCH', path: endpoint(endpointId), body: input, retry: 'idempotent' })
      },
      async remove(endpointId: string) {
        await request<void>({ method: 'DELETE', path: endpoint(endpointId), retry: 'idempotent', goneIsDone: true })
      },
      async rotateSecret(endpointId: string, options?: { timeoutMs?: number }) {
        const path = `${endpoint(endpointId)}/rotate-secret`
        return withSecret(`POST ${path}`, await request<WebhookEndpoint>({ method: 'POST', path, retry: 'once', timeoutMs: callTimeout(options) }))
      },
      enable(endpointId: string) {
        return request<WebhookEndpoint>({ method: 'PATCH', path: endpoint(endpointId), body: { enabled: true }, retry: 'idempotent' })
      },
      disable(endpointId: string) {
        return request<WebhookEndpoint>({ method: 'PATCH', path: endpoint(endpointId), body: { enabled: false }, retry: 'idempotent' })
      },
    },
    deliveries: {
      async resend(deliveryId: string) {
        const answer = await request<Record<string, string> | undefined>({
          method: 'POST',
          path: `/api/v1/webhook-endpoints/deliveries/${id(deliveryId, 'deliveryId')}/resend`,
          retry: 'idempotent',
        })
        return answer ?? {}
      },
    },
  }
}

/** `{base}/api/v1`, without a trailing slash, from what the user gave (with or without `/api/v1`). */
function apiRoot(baseUrl: unknown): string {
  if (typeof baseUrl !== 'string' && !(baseUrl instanceof URL)) {
    throw new TypeError("svc-webhooks: `baseUrl` is required: the service's base URL, e.g. process.env.SVC_API_URL (the client adds /api/v1).")
  }
  let url: URL
  try {
    url = new URL(String(baseUrl))
  } catch {
    throw new TypeError('svc-webhooks: `baseUrl` is not a URL; give the whole address with its scheme, e.g. https://api.example.com.')
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError('svc-webhooks: `baseUrl` must start with https:// (or http:// for a local emulator).')
  // The token is a bearer credential: over plain http anyone on the path can read and reuse it.
  if (url.protocol === 'http:' && !isLoopback(url.hostname)) {
    throw new TypeError(`svc-webhooks: \`baseUrl\` is http:// to ${url.hostname}: the token would cross the network unencrypted. Use https://; http:// is accepted only for a loopback host (127.0.0.1, ::1, localhost), e.g. a local emulator.`)
  }
  if (url.username !== '' || url.password !== '') throw new TypeError('svc-webhooks: `baseUrl` must not hold credentials; pass the token as `token`.')
  if (url.search !== '' || url.hash !== '') throw new TypeError('svc-webhooks: `baseUrl` must not have a query or fragment.')
  const path = url.pathname.replace(/\/+$/, '')
  return `${url.origin}${path.endsWith('/api/v1') ? path : `${path}/api/v1`}`
}

/** True for a host name that names this machine: 127.0.0.0/8, ::1, `localhost` and its subdomains (RFC 6761 §6.3). */
export function isLoopback(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '')
  if (host === 'localhost' || host.endsWith('.localhost') || host === '::1') return true
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host)
  if (v4) return Number(v4[1]) === 127 && v4.slice(2).every((part) => Number(part) <= 255)
  // ::ffff:127.x.y.z, as the URL parser writes it (hex).
  const mapped = /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.exec(host)
  return mapped !== null
}

/** Why no answer came, and whether the request provably never reached the service. */
function describeFailure(error: unknown, timeoutMs: number): { code: string; meaning: string; unsent: boolean } {
  const name = (error as { name?: unknown })?.name
  if (name === 'TimeoutError' || name === 'AbortError') return { code: 'timeout', meaning: `no answer within ${timeoutMs} ms`, unsent: false }
  const codes = networkCodes(error)
  const unsent = codes.length > 0 && codes.every((c) => c === 'ECONNREFUSED' || c === 'ENOTFOUND' || c === 'EAI_AGAIN')
  const code = codes[0] ?? 'network_error'
  const meaning =
    code === 'ECONNREFUSED' ? 'the connection was refused (is the service URL right?)'
    : code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? "the service's host name did not resolve"
    : `the request failed without an answer (${code})`
  return { code, meaning, unsent }
}

/** The `code`s of a fetch failure (undici puts them on `cause`, one per address tried). */
function networkCodes(error: unknown): string[] {
  const found: string[] = []
  const visit = (value: unknown, depth: number) => {
    if (depth > 3 || typeof value !== 'object' || value === null) return
    const code = (value as { code?: unknown }).code
    if (typeof code === 'string') found.push(code)
    const errors = (value as { errors?: unknown }).errors
    if (Array.isArray(errors)) for (const inner of errors.slice(0, 8)) visit(inner, depth + 1)
    visit((value as { cause?: unknown }).cause, depth + 1)
  }
  visit(error, 0)
  return found
}

/** A stand-in for a network error: its name, code and message with the token cut out, nothing else it held (a custom fetch may keep the request). */
function sanitizedCause(error: unknown, redact: (text: string) => string): Error {
  const source = error instanceof Error ? error : new Error(String(error))
  const inner = (source as { cause?: unknown }).cause
  const copy = new Error(redact(source.message), inner instanceof Error ? { cause: sanitizedCause(inner, redact) } : undefined)
  copy.name = source.name
  const code = (source as { code?: unknown }).code
  if (typeof code === 'string') (copy as Error & { code?: string }).code = code
  copy.stack = `${copy.name}: ${copy.message}`
  return copy
}

/** `Retry-After` in milliseconds from now: delta seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const date = Date.parse(text)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs)
}

/** The §7 answer as a {@link ServiceApiError}: `{detail, code}`, `{detail}`, the 422 list, or a body that is not JSON. */
function errorFromAnswer(
  what: string,
  status: number,
  text: string,
  { retryable, retryAfterMs, attempts, redact }: { retryable: boolean; retryAfterMs: number | undefined; attempts: number; redact: (text: string) => string },
): ServiceApiError {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  const fallback = FALLBACK_CODE[status] ?? (status >= 500 ? 'server_error' : 'http_error')
  let code: ServiceApiErrorCode = fallback
  let detail = `the service answered ${status}${parsed === undefined && text !== '' ? ' with a body that is not JSON' : ''}`
  let errors: ValidationIssue[] | undefined
  if (typeof parsed === 'object' && parsed !== null) {
    const body = parsed as { detail?: unknown; code?: unknown }
    if (typeof body.code === 'string' && body.code !== '') code = body.code
    if (typeof body.detail === 'string') detail = redact(body.detail)
    else if (Array.isArray(body.detail)) {
      errors = body.detail as ValidationIssue[]
      detail = redact(errors.map(describeIssue).join('; ') || 'validation error')
    }
  }
  const hint = HINT[status] ? ` ${HINT[status]}` : retryable ? ' It may pass later.' : ''
  const after = retryAfterMs === undefined ? '' : ` The service asked to wait ${Math.ceil(retryAfterMs / 1000)} s.`
  const tries = attempts > 1 ? ` (after ${attempts} attempts)` : ''
  return new ServiceApiError(`svc-webhooks: ${what}: ${status} ${code}: ${detail}${tries}.${hint}${after}`, { status, code, detail, retryable, errors, retryAfterMs })
}

/** One 422 entry as `body.url: msg`. */
function describeIssue(issue: unknown): string {
  if (typeof issue !== 'object' || issue === null) return String(issue)
  const { loc, msg } = issue as { loc?: unknown; msg?: unknown }
  const where = Array.isArray(loc) ? loc.map(String).join('.') : ''
  return `${where ? `${where}: ` : ''}${typeof msg === 'string' ? msg : 'invalid'}`
}
