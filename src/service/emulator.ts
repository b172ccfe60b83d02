/**
 * A local stand-in for the service, for tests: an HTTP server with the webhook-endpoint API of
 * spec/service-api.md §4.1 (bearer token, `business-id` header, §7 error bodies) and a sender
 * that follows §6.1-6.3 (sorted-key body, both signatures with the endpoint's current secret, 10 s
 * to answer, 5xx/429/timeouts/connection errors retried with backoff, other 4xx dropped, the
 * endpoint disabled after 20 consecutive failures). `node:http` is imported inside the function,
 * under a name a bundler does not follow: `svc-webhooks/testing` also loads in Workers.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { KNOWN_EVENT_TYPES } from '../events.js'
import { serializeEvent, signWebhook } from '../signing.js'
import type { ValidationIssue, WebhookEndpoint } from './types.js'

/** Options of {@link createServiceEmulator}. */
export interface ServiceEmulatorOptions {
  /**
   * The bearer token the API accepts.
   * @default a new 'svc_pat_...'
   */
  token?: string
  /**
   * The business the API serves (the `business-id` header must match).
   * @default a new UUID
   */
  businessId?: string
  /**
   * Consecutive failed attempts after which an endpoint is disabled (spec §3.2).
   * @default 20
   */
  disableAfter?: number
  /**
   * Milliseconds a receiver has to answer an attempt (spec §6.3).
   * @default 10000
   */
  timeoutMs?: number
  /**
   * The sender's backoff: the first wait, doubled after each failed attempt up to `maxDelayMs`,
   * and the attempts per delivery before it is given up ('failed'). The spec names no schedule.
   * @default { firstDelayMs: 1000, maxDelayMs: 60000, maxAttempts: 8 }
   */
  retry?: { firstDelayMs?: number; maxDelayMs?: number; maxAttempts?: number }
  /**
   * Whether the plan includes event webhooks; `false` makes `POST /webhook-endpoints` answer 403
   * `plan_limit_event_webhooks`.
   * @default true
   */
  eventWebhooks?: boolean
}

/** What {@link ServiceEmulator.faultApiCalls} does to a call. */
export interface EmulatedApiFault {
  /** Only calls with this method. */
  method?: string
  /** Only calls whose path (e.g. `/api/v1/webhook-endpoints/<id>/rotate-secret`) matches. */
  path?: string | RegExp
  /** Answer this status, with the service's error body for it. Without it (and without `lose`), the usual answer. */
  status?: number
  /** With `status`: the `Retry-After` header, in seconds. */
  retryAfterSeconds?: number
  /** With `status`: the error `code` instead of the usual one for the status. */
  code?: string
  /**
   * Whether the call does what it asks before the fault (a gateway's 503 after the backend acted).
   * @default false with `status`, true with `lose` or `delayMs` alone
   */
  acted?: boolean
  /** No answer: the connection is closed once the call acted (or not). */
  lose?: boolean
  /** Milliseconds before the answer is sent. */
  delayMs?: number
}

/** One attempt to deliver: the receiver's status, or why none came (`timeout`, `ECONNREFUSED`, ...). */
export interface EmulatedAttempt {
  status?: number
  error?: string
  /** Milliseconds since the epoch, when the attempt started. */
  at: number
}

/**
 * A delivery the emulator recorded. `held`: its endpoint was disabled; kept, not sent (resend it
 * by id once enabled). `dropped`: answered a 4xx other than 429. `failed`: `maxAttempts` used up,
 * or its endpoint deleted.
 */
export interface EmulatedDelivery {
  id: string
  endpointId: string
  /** The exact body, as text. */
  body: string
  attempts: EmulatedAttempt[]
  state: 'sending' | 'retrying' | 'delivered' | 'dropped' | 'failed' | 'held'
}

/** A running emulator: see {@link createServiceEmulator}. */
export interface ServiceEmulator {
  /** `http://127.0.0.1:<port>`; the client adds `/api/v1`. */
  readonly baseUrl: string
  readonly token: string
  readonly businessId: string
  /** Records a delivery of `event` (default: a fresh `message.received`) to the endpoint and sends it in the background; returns its id. */
  send(endpointId: string, event?: object): string
  /** Every delivery recorded, oldest first (copies). */
  deliveries(): EmulatedDelivery[]
  /** The endpoint as the API shows it (no secret), or undefined when unknown or deleted. */
  endpoint(id: string): WebhookEndpoint | undefined
  /** The endpoint's current signing secret. */
  secretOf(id: string): string
  /** Resolves once no delivery is sending or waiting to retry; rejects after `timeoutMs` (default 10000). */
  settled(timeoutMs?: number): Promise<void>
  /**
   * The next `n` API calls are answered `status` (default 503) with the service's error code for
   * it (401 `{ detail }`, 403 `forbidden`, 404 `not_found`, 422 a validation list, 429
   * `rate_limited`, 500 `internal_error`, 502 `bad_gateway`, 503 `service_unavailable`, 504
   * `gateway_timeout`), with `Retry-After` when given, and without acting. For a fault that acts
   * first, a lost or a slow answer, or one call only, see {@link ServiceEmulator.faultApiCalls}.
   */
  failNextApiCalls(n: number, status?: number, retryAfterSeconds?: number): void
  /**
   * The next `n` API calls that match `fault.method`/`fault.path` get `fault`: act first or not
   * (`acted`), then answer `status`, or no answer at all (`lose`: the connection is closed, as when
   * a gateway times out after the service acted), or the usual answer `delayMs` late. Faults queue
   * in the order given; a call takes the first that matches it.
   *
   * @example
   * emulator.faultApiCalls(1, { path: /rotate-secret$/, acted: true, lose: true }) // rotated, answer lost
   * emulator.faultApiCalls(1, { path: /rotate-secret$/, delayMs: 3000 })           // rotated now, answered in 3 s
   */
  faultApiCalls(n: number, fault: EmulatedApiFault): void
  /** The API calls received so far, oldest first: method, path and the status answered. */
  apiCalls(): Array<{ method: string; path: string; status: number }>
  /** Stops the server, every timer and every attempt in flight. */
  close(): Promise<void>
}

interface Endpoint {
  view: WebhookEndpoint
  secret: string
  deleted: boolean
}

interface Delivery extends EmulatedDelivery {
  eventType: string
  /** Attempts in the current run (a resend starts a new run). */
  tries: number
  /** Bumped by a resend, a disable or a delete: an older run's attempt no longer moves the state. */
  run: number
  timer?: ReturnType<typeof setTimeout>
}

const API = '/api/v1/webhook-endpoints'
/** The service's error code for each status it answers (spec §7 names the body, not every code). */
const ERROR_CODES: Record<number, string> = {
  400: 'bad_request',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  429: 'rate_limited',
  500: 'internal_error',
  502: 'bad_gateway',
  503: 'service_unavailable',
  504: 'gateway_timeout',
}
const MAX_API_BODY = 64 * 1024
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * Starts a local service emulator on 127.0.0.1 (a free port). Point {@link createServiceClient}
 * at `baseUrl` with `token` and `businessId`, create an endpoint whose URL is your receiver, and
 * `send` deliveries to it. Unlike the service, it accepts `http://` and loopback URLs (it is test
 * tooling on this machine). A resend to a disabled endpoint is answered 202 and held, not sent: a
 * disabled endpoint receives nothing.
 *
 * @example
 * import { createServiceEmulator } from 'svc-webhooks/testing'
 * import { createServiceClient } from 'svc-webhooks/service'
 *
 * const emulator = await createServiceEmulator({ retry: { firstDelayMs: 10 } })
 * const service = createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
 * const { id, signing_secret } = await service.endpoints.create({ label: 'test', url: receiverUrl, subscribed_events: [] })
 * emulator.send(id)
 * await emulator.settled()
 * await emulator.close()
 */
export async function createServiceEmulator(options: ServiceEmulatorOptions = {}): Promise<ServiceEmulator> {
  const {
    token = `svc_pat_${randomToken()}`,
    businessId = crypto.randomUUID(),
    disableAfter = 20,
    timeoutMs = 10_000,
    retry = {},
    eventWebhooks = true,
  } = options
  const { firstDelayMs = 1000, maxDelayMs = 60_000, maxAttempts = 8 } = retry
  if (typeof token !== 'string' || token === '') throw new TypeError('svc-webhooks: the emulator `token` must be a non-empty string.')
  if (typeof businessId !== 'string' || businessId === '') throw new TypeError('svc-webhooks: the emulator `businessId` must be a non-empty string.')
  const whole = (value: unknown, name: string, min: number) => {
    if (!Number.isInteger(value) || (value as number) < min) throw new TypeError(`svc-webhooks: the emulator \`${name}\` must be a whole number of at least ${min}.`)
  }
  whole(disableAfter, 'disableAfter', 1)
  whole(timeoutMs, 'timeoutMs', 1)
  whole(firstDelayMs, 'retry.firstDelayMs', 0)
  whole(maxDelayMs, 'retry.maxDelayMs', 0)
  whole(maxAttempts, 'retry.maxAttempts', 1)

  // A specifier held in a variable: bundlers for Workers leave it alone; only Node.js ever runs this.
  const httpModule = 'node:http'
  const { createServer } = (await import(/* @vite-ignore */ httpModule)) as typeof import('node:http')

  const endpoints = new Map<string, Endpoint>()
  const deliveries = new Map<string, Delivery>()
  const calls: Array<{ method: string; path: string; status: number }> = []
  const inFlight = new Set<AbortController>()
  const faults: Array<{ remaining: number; fault: EmulatedApiFault }> = []
  const slowAnswers = new Set<ReturnType<typeof setTimeout>>()
  let closed = false

  // ---- the sender (spec §6) -----------------------------------------------------------------

  function live(id: string): Endpoint | undefined {
    const endpoint = endpoints.get(id)
    return endpoint && !endpoint.deleted ? endpoint : undefined
  }

  function schedule(delivery: Delivery, ms: number): void {
    const run = delivery.run
    delivery.timer = setTimeout(() => {
      delivery.timer = undefined
      if (delivery.run === run) void attempt(delivery)
    }, ms)
    delivery.timer.unref?.()
  }

  /** Stops a delivery's current run (a disable, a delete, a resend): its timer cleared, an attempt in flight no longer counts. */
  function stop(delivery: Delivery, state: EmulatedDelivery['state']): void {
    if (delivery.timer !== undefined) clearTimeout(delivery.timer)
    delivery.timer = undefined
    delivery.run++
    delivery.state = state
  }

  async function attempt(delivery: Delivery): Promise<void> {
    if (closed) return
    const endpoint = live(delivery.endpointId)
    if (endpoint === undefined) return stop(delivery, 'failed')
    if (!endpoint.view.enabled) return stop(delivery, 'held')
    const run = delivery.run
    delivery.state = 'sending'
    delivery.tries++
    const at = Date.now()
    // Signed now, with the secret the endpoint has now, and a fresh timestamp (spec §6.2).
    const signed = await signWebhook({ secret: endpoint.secret, body: delivery.body, id: delivery.id })
    const controller = new AbortController()
    inFlight.add(controller)
    const timer = setTimeout(() => controller.abort(new DOMException('timeout', 'TimeoutError')), timeoutMs)
    timer.unref?.()
    let result: EmulatedAttempt
    try {
      const response = await fetch(endpoint.view.url, {
        method: 'POST',
        headers: { ...signed.headers, 'svc-webhook-event': delivery.eventType, 'user-agent': 'svc-webhooks-emulator' },
        body: signed.rawBody as BodyInit,
        redirect: 'manual',
        signal: controller.signal,
      })
      await response.arrayBuffer()
      result = { status: response.status, at }
    } catch (error) {
      result = { error: controller.signal.aborted && !closed ? 'timeout' : failureCode(error), at }
    } finally {
      clearTimeout(timer)
      inFlight.delete(controller)
    }
    delivery.attempts.push(result)
    if (closed || delivery.run !== run) return
    outcome(delivery, endpoint, result)
  }

  /** What an attempt's answer does to the delivery and its endpoint (spec §6.3, §3.2). */
  function outcome(delivery: Delivery, endpoint: Endpoint, result: EmulatedAttempt): void {
    const { status } = result
    if (status !== undefined && status >= 200 && status < 300) {
      delivery.state = 'delivered'
      endpoint.view.consecutive_failures = 0
      endpoint.view.last_delivery_at = new Date(result.at).toISOString()
      return
    }
    endpoint.view.consecutive_failures++
    const permanent = status !== undefined && status >= 400 && status < 500 && status !== 429
    if (endpoint.view.consecutive_failures >= disableAfter && endpoint.view.enabled && !endpoint.deleted) {
      endpoint.view.enabled = false
      endpoint.view.last_error = status !== undefined ? `HTTP ${status}` : (result.error ?? 'no answer')
      delivery.state = permanent ? 'dropped' : 'held'
      for (const other of deliveries.values()) {
        if (other !== delivery && other.endpointId === endpoint.view.id && (other.state === 'retrying' || other.state === 'sending')) stop(other, 'held')
      }
      return
    }
    if (permanent) {
      delivery.state = 'dropped'
      return
    }
    if (delivery.tries >= maxAttempts) {
      delivery.state = 'failed'
      return
    }
    delivery.state = 'retrying'
    schedule(delivery, Math.min(maxDelayMs, firstDelayMs * 2 ** (delivery.tries - 1)))
  }

  function record(endpointId: string, event: object | undefined): string {
    if (closed) throw new Error('svc-webhooks: the emulator is closed.')
    const endpoint = live(endpointId)
    if (endpoint === undefined) throw new TypeError(`svc-webhooks: the emulator has no endpoint ${endpointId}.`)
    const payload = event ?? sampleMessage(businessId)
    const eventType = (payload as { event?: unknown }).event
    if (typeof eventType !== 'string') throw new TypeError('svc-webhooks: emulator.send needs an event object with a string `event` field.')
    const subscribed = endpoint.view.subscribed_events
    if (subscribed.length > 0 && !subscribed.includes(eventType)) {
      throw new TypeError(`svc-webhooks: endpoint ${endpointId} is not subscribed to "${eventType}" (it takes ${subscribed.join(', ')}); the service would not deliver it there.`)
    }
    const delivery: Delivery = { id: crypto.randomUUID(), endpointId, body: serializeEvent(payload), attempts: [], state: 'sending', eventType, tries: 0, run: 0 }
    deliveries.set(delivery.id, delivery)
    void attempt(delivery)
    return delivery.id
  }

  // ---- the API (spec §4.1, §5, §7) ----------------------------------------------------------

  type Answer = { status: number; body?: unknown; headers?: Record<string, string> }
  const apiError = (status: number, code: string, detail: string): Answer => ({ status, body: { detail, code } })
  const invalid = (issues: ValidationIssue[]): Answer => ({ status: 422, body: { detail: issues } })
  const notFound = (what: string) => apiError(404, 'not_found', `${what} not found`)
  /** The answer the service gives for an injected status: its §7 body, with its usual code. */
  const injected = (status: number, code?: string): Answer => {
    if (status === 401 && code === undefined) return { status, body: { detail: 'Not authenticated' } }
    if (status === 422 && code === undefined) return invalid([{ loc: ['body'], msg: 'Injected validation failure', type: 'value_error', input: null }])
    return apiError(status, code ?? ERROR_CODES[status] ?? (status >= 500 ? 'internal_error' : 'error'), 'Injected failure')
  }

  function validate(body: Record<string, unknown>, creating: boolean): ValidationIssue[] {
    const issues: ValidationIssue[] = []
    const issue = (field: string | Array<string | number>, msg: string, type: string, input: unknown) =>
      issues.push({ loc: ['body', ...(Array.isArray(field) ? field : [field])], msg, type, input })
    if (creating && body.url === undefined) issue('url', 'Field required', 'missing', body)
    if (body.url !== undefined) {
      let url: URL | undefined
      try {
        url = typeof body.url === 'string' ? new URL(body.url) : undefined
      } catch {
        url = undefined
      }
      if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) issue('url', 'URL must be an http(s) URL', 'url_scheme', body.url)
    }
    if (body.label !== undefined && typeof body.label !== 'string') issue('label', 'Input should be a valid string', 'string_type', body.label)
    if (body.subscribed_events !== undefined) {
      if (!Array.isArray(body.subscribed_events)) issue('subscribed_events', 'Input should be a valid list', 'list_type', body.subscribed_events)
      else {
        body.subscribed_events.forEach((type: unknown, i) => {
          if (typeof type !== 'string' || !(KNOWN_EVENT_TYPES as readonly string[]).includes(type)) {
            issue(['subscribed_events', i], `Unknown event type; known: ${KNOWN_EVENT_TYPES.join(', ')}`, 'value_error', type)
          }
        })
      }
    }
    if (body.enabled !== undefined && typeof body.enabled !== 'boolean') issue('enabled', 'Input should be a valid boolean', 'bool_type', body.enabled)
    return issues
  }

  const view = (endpoint: Endpoint): WebhookEndpoint => ({ ...endpoint.view, subscribed_events: [...endpoint.view.subscribed_events] })

  function route(method: string, path: string, body: unknown): Answer {
    const json = (typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}) as Record<string, unknown>
    if (path === API && method === 'GET') {
      return { status: 200, body: [...endpoints.values()].filter((e) => !e.deleted).reverse().map(view) }
    }
    if (path === API && method === 'POST') {
      if (!eventWebhooks) return apiError(403, 'plan_limit_event_webhooks', 'Your plan does not include event webhooks.')
      const issues = validate(json, true)
      if (issues.length > 0) return invalid(issues)
      const endpoint: Endpoint = {
        secret: newSecret(),
        deleted: false,
        view: {
          id: crypto.randomUUID(),
          label: (json.label as string | undefined) ?? '',
          url: json.url as string,
          subscribed_events: [...((json.subscribed_events as string[] | undefined) ?? [])],
          enabled: true,
          consecutive_failures: 0,
          last_error: null,
          last_delivery_at: null,
          created: new Date().toISOString(),
        },
      }
      endpoints.set(endpoint.view.id, endpoint)
      return { status: 201, body: { ...view(endpoint), signing_secret: endpoint.secret } }
    }
    const resend = /^\/api\/v1\/webhook-endpoints\/deliveries\/([^/]+)\/resend$/.exec(path)
    if (resend && method === 'POST') {
      const delivery = deliveries.get(decodeSegment(resend[1]!) ?? '')
      if (delivery === undefined) return notFound('Delivery')
      const endpoint = live(delivery.endpointId)
      if (endpoint === undefined) return notFound('The endpoint of this delivery')
      // The stored bytes again, signed afresh at send time; a new run of attempts (spec §6.2).
      stop(delivery, 'sending')
      delivery.tries = 0
      void attempt(delivery)
      return { status: 202, body: { status: 'queued', delivery_id: delivery.id } }
    }
    const one = /^\/api\/v1\/webhook-endpoints\/([^/]+)(\/rotate-secret)?$/.exec(path)
    if (one) {
      const endpoint = live(decodeSegment(one[1]!) ?? '')
      const rotate = one[2] !== undefined
      if (!(rotate ? method === 'POST' : method === 'PATCH' || method === 'DELETE')) return apiError(405, 'method_not_allowed', 'Method Not Allowed')
      if (endpoint === undefined) return notFound('Webhook endpoint')
      if (rotate) {
        // The old secret stops at once: the next attempt signs with the new one (spec §4.1).
        endpoint.secret = newSecret()
        return { status: 200, body: { ...view(endpoint), signing_secret: endpoint.secret } }
      }
      if (method === 'DELETE') {
        endpoint.deleted = true
        for (const delivery of deliveries.values()) {
          if (delivery.endpointId === endpoint.view.id && ['sending', 'retrying', 'held'].includes(delivery.state)) stop(delivery, 'failed')
        }
        return { status: 204 }
      }
      const issues = validate(json, false)
      if (issues.length > 0) return invalid(issues)
      if (typeof json.label === 'string') endpoint.view.label = json.label
      if (typeof json.url === 'string') endpoint.view.url = json.url
      if (Array.isArray(json.subscribed_events)) endpoint.view.subscribed_events = [...(json.subscribed_events as string[])]
      if (json.enabled === true && !endpoint.view.enabled) {
        // Enabling a disabled endpoint resets the streak (spec §3.2); an enabled one keeps it, so a
        // watcher that enables too eagerly cannot hide a receiver failing toward its 20.
        // Held deliveries stay held until resent by id.
        endpoint.view.enabled = true
        endpoint.view.consecutive_failures = 0
      } else if (json.enabled === false && endpoint.view.enabled) {
        endpoint.view.enabled = false
        for (const delivery of deliveries.values()) {
          if (delivery.endpointId === endpoint.view.id && (delivery.state === 'retrying' || delivery.state === 'sending')) stop(delivery, 'held')
        }
      }
      return { status: 200, body: view(endpoint) }
    }
    return apiError(404, 'not_found', 'Not Found')
  }

  /** The first queued fault matching this call, taken; undefined when none. */
  function takeFault(method: string, path: string): EmulatedApiFault | undefined {
    const index = faults.findIndex(({ fault }) => {
      if (fault.method !== undefined && fault.method.toUpperCase() !== method) return false
      if (fault.path === undefined) return true
      return typeof fault.path === 'string' ? fault.path === path : fault.path.test(path)
    })
    if (index < 0) return undefined
    const entry = faults[index]!
    if (--entry.remaining <= 0) faults.splice(index, 1)
    return entry.fault
  }

  /** A path segment as sent, decoded; undefined when its `%` escapes are not valid UTF-8 (never thrown: it is the caller's input). */
  function decodeSegment(segment: string): string | undefined {
    try {
      return decodeURIComponent(segment)
    } catch {
      return undefined
    }
  }

  function answerRequest(req: IncomingMessage, path: string, body: Buffer, fault: EmulatedApiFault | undefined): Answer {
    if (fault?.status !== undefined && !(fault.acted ?? false)) return withRetryAfter(injected(fault.status, fault.code), fault)
    if (req.headers.authorization !== `Bearer ${token}`) return { status: 401, body: { detail: 'Not authenticated' } }
    const business = req.headers['business-id']
    if (business === undefined) return invalid([{ loc: ['header', 'business-id'], msg: 'Field required', type: 'missing', input: null }])
    if (business !== businessId) return apiError(404, 'business_not_found', 'Business not found')
    let parsed: unknown
    if (body.length > 0) {
      try {
        parsed = JSON.parse(body.toString('utf8'))
      } catch {
        return invalid([{ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid', input: null }])
      }
    }
    const id = /^\/api\/v1\/webhook-endpoints\/(?:deliveries\/)?([^/]+)/.exec(path)?.[1]
    if (id !== undefined && id !== 'deliveries') {
      const decoded = decodeSegment(id)
      if (decoded === undefined || !UUID.test(decoded)) {
        return invalid([{ loc: ['path', path.includes('/deliveries/') ? 'delivery_id' : 'endpoint_id'], msg: 'Input should be a valid UUID', type: 'uuid_parsing', input: id }])
      }
    }
    const answer = route(req.method ?? 'GET', path, parsed)
    // The call acted; the gateway in front answers its own status.
    if (fault?.status !== undefined) return withRetryAfter(injected(fault.status, fault.code), fault)
    return answer
  }

  function withRetryAfter(answer: Answer, fault: EmulatedApiFault): Answer {
    return fault.retryAfterSeconds === undefined ? answer : { ...answer, headers: { ...answer.headers, 'retry-after': String(fault.retryAfterSeconds) } }
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size <= MAX_API_BODY) chunks.push(chunk)
    })
    req.on('end', () => {
      // Whatever the request holds, the emulator answers it: a throw here would end the user's test process.
      let answer: Answer
      const method = req.method ?? 'GET'
      const path = (req.url ?? '/').split('?')[0]!
      const fault = takeFault(method, path)
      try {
        answer = size > MAX_API_BODY ? apiError(413, 'payload_too_large', 'Request body too large') : answerRequest(req, path, Buffer.concat(chunks), fault)
      } catch {
        answer = apiError(500, 'internal_error', 'Internal Server Error')
      }
      calls.push({ method, path, status: fault?.lose ? 0 : answer.status })
      const send = () => {
        if (closed) return void res.destroy()
        if (fault?.lose) return void res.destroy()
        const text = answer.body === undefined ? '' : JSON.stringify(answer.body)
        res.writeHead(answer.status, { ...(text ? { 'content-type': 'application/json' } : {}), ...answer.headers })
        res.end(text)
      }
      if (fault?.delayMs !== undefined && fault.delayMs > 0) {
        const timer = setTimeout(send, fault.delayMs)
        timer.unref?.()
        slowAnswers.add(timer)
        res.once('close', () => slowAnswers.delete(timer))
      } else send()
    })
    req.on('error', () => res.destroy())
  }

  const server: Server = createServer(handle)
  await new Promise<void>((done, fail) => {
    server.once('error', fail)
    server.listen(0, '127.0.0.1', () => done())
  })
  const { port } = server.address() as { port: number }

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    token,
    businessId,
    send: record,
    deliveries: () => [...deliveries.values()].map(({ id, endpointId, body, attempts, state }) => ({ id, endpointId, body, attempts: attempts.map((a) => ({ ...a })), state })),
    endpoint: (id) => {
      const endpoint = live(id)
      return endpoint && view(endpoint)
    },
    secretOf: (id) => {
      const endpoint = live(id)
      if (endpoint === undefined) throw new TypeError(`svc-webhooks: the emulator has no endpoint ${id}.`)
      return endpoint.secret
    },
    async settled(limitMs = 10_000) {
      const deadline = Date.now() + limitMs
      for (;;) {
        const busy = [...deliveries.values()].filter((d) => d.state === 'sending' || d.state === 'retrying')
        if (busy.length === 0) return
        if (Date.now() >= deadline) throw new Error(`svc-webhooks: the emulator did not settle within ${limitMs} ms: ${busy.length} deliveries still sending or retrying.`)
        await new Promise((done) => setTimeout(done, 5))
      }
    },
    failNextApiCalls(n, status = 503, retryAfterSeconds) {
      if (!Number.isInteger(n) || n < 0) throw new TypeError('svc-webhooks: failNextApiCalls takes a whole number of calls.')
      // Replaces what an earlier call of it queued, as before; faultApiCalls' own faults stay.
      for (let i = faults.length - 1; i >= 0; i--) if (faults[i]!.fault.method === undefined && faults[i]!.fault.path === undefined && !faults[i]!.fault.acted) faults.splice(i, 1)
      if (n > 0) faults.unshift({ remaining: n, fault: { status, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) } })
    },
    faultApiCalls(n, fault) {
      if (!Number.isInteger(n) || n < 1) throw new TypeError('svc-webhooks: faultApiCalls takes a whole number of calls, 1 or more.')
      if (typeof fault !== 'object' || fault === null) throw new TypeError('svc-webhooks: faultApiCalls takes { status?, acted?, lose?, delayMs?, method?, path? }.')
      if (fault.status !== undefined && (!Number.isInteger(fault.status) || fault.status < 400 || fault.status > 599)) throw new TypeError('svc-webhooks: a fault `status` is an error status, 400 to 599.')
      if (fault.delayMs !== undefined && (!Number.isFinite(fault.delayMs) || fault.delayMs < 0)) throw new TypeError('svc-webhooks: a fault `delayMs` is a number of milliseconds, 0 or more.')
      faults.push({ remaining: n, fault: { ...fault, acted: fault.acted ?? (fault.status === undefined) } })
    },
    apiCalls: () => calls.map((call) => ({ ...call })),
    async close() {
      if (closed) return
      closed = true
      for (const delivery of deliveries.values()) {
        if (delivery.timer !== undefined) clearTimeout(delivery.timer)
        delivery.timer = undefined
      }
      for (const controller of inFlight) controller.abort()
      for (const timer of slowAnswers) clearTimeout(timer)
      server.closeAllConnections()
      await new Promise<void>((done) => server.close(() => done()))
    },
  }
}

/** A fresh `message.received` for `businessId`: new ids, `created_at` now with microseconds and offset (spec §6.1). */
function sampleMessage(businessId: string): object {
  const conversation = crypto.randomUUID()
  const micros = String(Math.floor(Math.random() * 1000)).padStart(3, '0')
  return {
    event: 'message.received',
    business_id: businessId,
    conversation_id: conversation,
    message: {
      id: crypto.randomUUID(),
      chat_id: conversation,
      text: 'Hola, ¿tienen mesa para dos a las 20:00?',
      from: '+34600000000',
      sender_type: 'customer',
      created_at: new Date().toISOString().replace(/Z$/, `${micros}+00:00`),
    },
  }
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24))
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

function newSecret(): string {
  return `svc_whsec_${randomToken()}`
}

/** The network's code for a failed attempt (ECONNREFUSED, ECONNRESET, ...). */
function failureCode(error: unknown): string {
  for (let value: unknown = error, depth = 0; depth < 4 && typeof value === 'object' && value !== null; depth++) {
    const code = (value as { code?: unknown }).code
    if (typeof code === 'string') return code
    value = (value as { cause?: unknown }).cause
  }
  return 'connection error'
}
