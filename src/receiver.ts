/**
 * The framework-neutral receiver: verify, claim the delivery id, run the handler, complete or
 * release, and answer with the status that keeps the sender's retry promise (DESIGN.md answers
 * table; spec/service-api.md §6.3: 5xx and 429 are retried, every other 4xx is permanent).
 */
import { hmacHex } from '#crypto'
import { ANSWER_ROWS, renderAnswers, type AnswerName, type RenderedAnswers, type WebhookAnswerCode, type WebhookOutcome, type WebhookResponse } from './answers.js'
import { answerNameOf } from './errors.js'
import type { WebhookHandler, WebhookHandlers } from './contracts/handler.js'
import { DELIVERY_ID, HEADER_ID, type SignedHeaders } from './headers.js'
import type { WebhookTransport } from './transport.js'
import type { WebhookInput } from './input.js'
import { resolveVerifyOptions, type SecretSet, type VerifyOptions } from './options.js'
import { TIMED_OUT, within } from './secrets/index.js'
import { MemoryStore } from './stores/memory.js'
import { claimRun } from './claim.js'
import { DEFAULT_RETENTION_MS, isIdempotencyStore, type IdempotencyStore } from './contracts/store.js'
import { positiveOption, waitOption } from './option-checks.js'
import { heldTransport, verifyDelivery, verifySignature, type VerifiedDelivery, type VerifyProgress } from './verify.js'
import type { FilingInbox, WebhookInbox, WebhookInboxProducer } from './contracts/inbox.js'
import { appendWithin } from './inbox/append.js'
import { createLogWindow, printable } from './log-window.js'
import { endScope, type WebhookTelemetry } from './telemetry.js'
import { AnswerCounter, callHook, ownError, resolveLog, resultLine, seenBySender, startupWarnings, type ReceiverStats, type WebhookLog } from './visibility.js'
import type { EndpointWatcher } from './contracts/watch.js'
import type { ReplayResult, WebhookHistory } from './history/types.js'

export type { WebhookAnswerCode, WebhookOutcome, WebhookResponse } from './answers.js'
export type { WebhookTransport } from './transport.js'

/** One delivery's result, for logging and metrics. Never holds the body or a secret. */
export interface WebhookResult {
  outcome: WebhookOutcome
  status: number
  /** The refusal or answer code, when not `processed`. */
  code?: WebhookAnswerCode
  /** The delivery id: verified, or as sent when the delivery was refused (an unsigned claim, for logs only). */
  id?: string
  /** The event type from the signed body, once verified. */
  eventType?: string
  signatureVersion?: 'v2' | 'v1'
  /** The endpoint (dedupe namespace) the delivery was for, once known. */
  endpoint?: string
  /**
   * The handler's or the store's error, or the verification error. With outcome `processed`: the
   * completion could not be recorded, or the handler outlasted `leaseMs` (another request may have run it too).
   */
  error?: unknown
  durationMs: number
}

/**
 * The endpoint a request is for, from the framework's own request (sync or async): the dedupe
 * namespace of a multi-tenant receiver, e.g. `(req) => req.params.tenant`.
 */
export type EndpointLookup<R> = (request: R) => string | Promise<string>

/** Options of {@link createWebhookReceiver}: verification options plus handlers and dedupe; `R` is the entry's request type. */
export interface WebhookReceiverOptions<R = any> extends VerifyOptions<R> {
  /**
   * Handlers by event type, called as `handler(event, delivery)`. Optional with `inbox`: the
   * worker runs the handlers; given anyway, a type with no handler is answered 200 ignored
   * instead of being appended.
   */
  on?: WebhookHandlers
  /**
   * A durable inbox: a verified delivery is appended and answered 202 once the append is
   * acknowledged, and `createInboxWorker` runs the handler later (never inside the request). An
   * id already accepted or processed is 200 duplicate; an unreachable inbox 503 with `Retry-After`.
   */
  inbox?: WebhookInboxProducer
  /**
   * The older name of `engineWaitMs`, from when only the inbox waited: given, it is that wait
   * for the store and the inbox alike.
   * @deprecated Use `engineWaitMs`.
   */
  inboxWaitMs?: number
  /**
   * How long a verified delivery may wait for its store or inbox, in milliseconds: one deadline
   * for the claim, the completion and the append, counted from verification. A request that
   * meets a server restarting or failing over (Sentinel promoting a replica, a Postgres standby
   * promoted) keeps its call going until the client reaches the new primary, so a failover
   * shorter than this costs the sender latency, not failed answers. Past it: 503 with
   * `Retry-After`. Up to 9000 (the sender waits 10 s). `inboxWaitMs`, when given, is this wait
   * under its older name.
   * @default 8000
   */
  engineWaitMs?: number
  /**
   * Bound on the requests waiting for the store or inbox at once, and on the body bytes they
   * hold: past either, a new delivery is answered 503 with `Retry-After` at once instead of
   * joining the wait, so an outage longer than the wait cannot exhaust memory. A request stops
   * counting once its handler starts or its append is answered.
   * @default { requests: 1000, bytes: 67108864 } (64 MiB)
   */
  maxHeld?: { requests?: number; bytes?: number }
  /**
   * Where processed delivery ids are kept. Use `RedisStore` when several processes receive.
   * @default new MemoryStore()
   */
  store?: IdempotencyStore
  /**
   * Namespace of the dedupe keys, so two endpoints sharing a store never collide. A function of
   * the request when one receiver serves many endpoints; required when `secret` is a function, so
   * tenants can never mark each other's deliveries done.
   * @default 'default'
   */
  endpoint?: string | EndpointLookup<R>
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
  /**
   * Where the receiver's lines go: a refused or failed delivery's line (its code, the delivery id
   * when known, the fix; never the body or a secret), the first of each code at once and its
   * repeats within 10 s summarised in one line; the startup warnings; and a warning as failing
   * answers to the sender pile up towards its 20. A function taking one line, or `false`.
   * `onResult` sees every request.
   * @default console.warn
   */
  log?: WebhookLog
  /**
   * Called once per request with its result: the logging and metrics hook. May be sync or async;
   * a throw or a rejection is swallowed and never changes the answer.
   */
  onResult?: (result: WebhookResult) => unknown
  /**
   * Traces and metrics: `openTelemetry()` from `svc-webhooks/opentelemetry`, or your own
   * {@link WebhookTelemetry}. A span per delivery received; with `inbox`, its trace context is
   * accepted with the delivery so the worker's process span joins the same trace.
   * @default none (nothing is called)
   */
  telemetry?: WebhookTelemetry
  /**
   * Watch the endpoint through the service's API: `endpointWatcher({ service, endpointId,
   * reenable })` from svc-webhooks/service. It warns as the service's failure count climbs, says
   * why it was disabled, and with `reenable: true` enables it again once this receiver is ready
   * (its store or inbox answers, its secret reads, a signed probe passes its verification). Its
   * view is `stats().endpoint`; `close()` stops it.
   * @default none (no call to the service)
   */
  watch?: EndpointWatcher
  /**
   * Where each delivery's entry is kept: `MemoryHistory`, `RedisHistory` (svc-webhooks/redis) or
   * `PostgresHistory` (svc-webhooks/postgres); `replay(id)` and the console read it. Refused
   * requests are only counted. Its outage never changes an answer.
   * @default none (nothing is kept)
   */
  history?: WebhookHistory
}

/** A request as the receiver sees it. `method`, when given, must be POST. */
export interface WebhookRequest extends WebhookInput {
  method?: string
}

/** What an entry's handler offers a health endpoint: the receiver's `stats()`. */
export interface WebhookStatsSource {
  /** Answers by outcome, the failing streak, and the inbox's figures. */
  stats(): Promise<ReceiverStats>
  /** The receiver's `replay` (with `history`): what the console's replay button calls. */
  replay?(id: string, endpoint?: string): Promise<ReplayResult>
}

/** A receiver: `handle` and `receive` are the whole flow. */
export interface WebhookReceiver<R = any> {
  /**
   * Receives a request whose body the caller already holds. A `secret` or `endpoint` function
   * gets this `WebhookRequest`.
   */
  handle(request: WebhookRequest): Promise<WebhookResponse>
  /**
   * Receives a framework's request through a transport: method, declared length and every header
   * check run before the body is read, then the bounded, deadline-limited read, verification,
   * dedupe and the answer.
   */
  receive(request: R, transport: WebhookTransport<R>): Promise<WebhookResponse>
  /** The receiver's options as given (validated when the receiver was created). */
  readonly options: Readonly<WebhookReceiverOptions<R>>
  /** Answers by outcome, the failing streak, and the inbox's figures: for a health endpoint. */
  stats(): Promise<ReceiverStats>
  /** Stops the endpoint watch (`watch`), if any; its timer is unref'd, so it never keeps a process up anyway. */
  close(): void
  /**
   * Runs a delivery kept in `history` (with `keepBodies`) through its handler again, on purpose:
   * the dedupe record is not consulted. Rejects with a `ReplayError` (`body_not_kept`: resend it
   * through the service instead; `not_found`; `no_handler`).
   */
  replay(id: string, endpoint?: string): Promise<ReplayResult>
  /** The `history` option, if any. */
  readonly history: WebhookHistory | undefined
}


const DEFAULT_LEASE_MS = 60_000
/** `engineWaitMs` by default: a Sentinel or Postgres failover of a few seconds fits, and the answer still comes well inside the sender's 10 s. */
const DEFAULT_ENGINE_WAIT_MS = 8000

/**
 * The answer to each way claim → run → complete ends (DESIGN.md answers table). The handler's
 * work is done once it returned: a completion that could not be recorded, or that came after the
 * lease ran out, is still answered 2xx, with the failure reported in `onResult`.
 */
const CLAIM_ANSWERS = {
  done: 'processed',
  lease_lost: 'processed',
  completed: 'duplicate',
  in_flight: 'in_flight',
  claim: 'store_unavailable',
  step: 'handler_failed',
  complete: 'processed',
} as const satisfies Record<string, AnswerName>

/**
 * The dedupe namespace of an endpoint: `%` and `:` percent-encoded, so `<namespace>:<id>` splits
 * at its first `:` and no endpoint and id can make another pair's key. Names without those two
 * characters keep the keys they always had.
 */
export function endpointNamespace(endpoint: string): string {
  return endpoint.replace(/[%:]/g, (c) => (c === '%' ? '%25' : '%3A'))
}

/**
 * The replay key of a v1-verified delivery: what the v1 signature covers (timestamp and body),
 * as an HMAC under the matched secret. A space never occurs in a delivery id, so it cannot
 * collide with an id key. An exact replay finds it; a genuine v1 retry carries a fresh timestamp
 * (spec/service-api.md §6.2) and gets a new one.
 */
async function v1ReplayKey(namespace: string, signed: SignedHeaders, delivery: VerifiedDelivery, secrets: SecretSet): Promise<string> {
  const digest = await hmacHex(secrets.keys[delivery.secretIndex]!, `${signed.timestampText}.`, delivery.rawBody)
  return `${namespace}:v1 ${signed.timestampText}.${digest}`
}

/**
 * A claim's owner token: unique across processes (a random prefix per process) and requests (a
 * counter), without drawing fresh randomness per request.
 */
let ownerPrefix: string | undefined
let owners = 0
// Drawn on first use: Workers refuse random values at module scope.
const nextOwner = (): string => `${(ownerPrefix ??= crypto.randomUUID())}:${owners++}`

/**
 * Creates a receiver: verification, exactly-once processing and the answers table in one
 * framework-neutral flow. Invalid options throw here, not on the first request.
 *
 * @example
 * const receiver = createWebhookReceiver({
 *   secret: process.env.SVC_WEBHOOK_SECRET!,
 *   on: { 'message.received': async (event) => saveMessage(event.message) },
 * })
 * const { status, headers, body } = await receiver.handle({ method: 'POST', body: rawBytes, headers: reqHeaders })
 */
export function createWebhookReceiver<R = any>(options: WebhookReceiverOptions<R>): WebhookReceiver<R> {
  const opts = resolveVerifyOptions(options)
  const {
    on,
    inbox,
    store = new MemoryStore(),
    endpoint = 'default',
    leaseMs = DEFAULT_LEASE_MS,
    retentionMs = DEFAULT_RETENTION_MS,
    retryAfterSeconds = 5,
    inboxWaitMs,
    engineWaitMs = inboxWaitMs ?? DEFAULT_ENGINE_WAIT_MS,
    maxHeld = {},
    onResult,
    telemetry,
  } = options
  const log = resolveLog(options.log)
  opts.sourceSettings.log = log
  const { history } = options
  if (history !== undefined && typeof history?.received !== 'function') throw new TypeError('svc-webhooks: `history` must be a MemoryHistory, RedisHistory or PostgresHistory.')
  if (inbox !== undefined && typeof inbox?.append !== 'function') {
    throw new TypeError('svc-webhooks: `inbox` must have append() (MemoryInbox, RedisInbox, PostgresInbox, QueueInbox).')
  }
  if (inbox === undefined && (typeof on !== 'object' || on === null)) {
    throw new TypeError('svc-webhooks: `on` must map event types to handlers, e.g. { "message.received": async (event) => {} }.')
  }
  for (const [type, handler] of Object.entries(on ?? {})) {
    if (typeof handler !== 'function') throw new TypeError(`svc-webhooks: the handler for "${type}" is not a function.`)
  }
  if (!isIdempotencyStore(store)) {
    throw new TypeError('svc-webhooks: `store` must implement claim, complete and release (IdempotencyStore).')
  }
  if (typeof options.secret === 'function' && options.endpoint === undefined) {
    throw new TypeError(
      'svc-webhooks: `secret` is a function (one secret per endpoint), so `endpoint` must be one too, e.g. (req) => req.params.tenant: ' +
        'it namespaces the dedupe keys, so tenants can never mark each other\'s deliveries done.',
    )
  }
  if (typeof endpoint !== 'function' && (typeof endpoint !== 'string' || endpoint.length === 0)) {
    throw new TypeError('svc-webhooks: `endpoint` must be a non-empty string, or a function of the request returning one.')
  }
  positiveOption(leaseMs, '`leaseMs`')
  positiveOption(retentionMs, '`retentionMs`')
  positiveOption(retryAfterSeconds, '`retryAfterSeconds`', 'seconds')
  if (inboxWaitMs !== undefined) waitOption(inboxWaitMs, '`inboxWaitMs`', 9000)
  waitOption(engineWaitMs, '`engineWaitMs`', 9000)
  const { requests: maxHeldRequests = 1000, bytes: maxHeldBytes = 64 * 1024 * 1024 } = maxHeld ?? {}
  positiveOption(maxHeldRequests, '`maxHeld.requests`', 'requests')
  positiveOption(maxHeldBytes, '`maxHeld.bytes`', 'bytes')
  // Requests (and their body bytes) waiting on the store or inbox right now: see `maxHeld`.
  let heldRequests = 0
  let heldBytes = 0
  // A Map: the event type comes from JSON.parse, and looking such a string up as a property name costs more than hashing it.
  const handlers = on === undefined ? undefined : new Map(Object.entries(on as Record<string, WebhookHandler<unknown>>))
  if (log) {
    const secrets = typeof options.secret === 'function' ? undefined : [options.secret].flat()
    for (const line of startupWarnings(on, secrets)) log(line)
  }
  if (telemetry !== undefined && (typeof telemetry?.receive !== 'function' || typeof telemetry.process !== 'function')) {
    throw new TypeError('svc-webhooks: `telemetry` must be a WebhookTelemetry, e.g. openTelemetry() from svc-webhooks/opentelemetry.')
  }
  const { watch } = options
  if (watch !== undefined && (typeof watch?.start !== 'function' || typeof options.secret === 'function')) {
    throw new TypeError(
      'svc-webhooks: `watch` must be endpointWatcher({ service, endpointId }) from svc-webhooks/service, on a receiver of one endpoint ' +
        '(with a `secret` function, call watchEndpoint per endpoint).',
    )
  }
  const counter = new AnswerCounter(log)
  const ignoredTypes = new Set<string>()
  const answers: RenderedAnswers = renderAnswers(retryAfterSeconds)
  const fixedNamespace = typeof endpoint === 'string' ? endpointNamespace(endpoint) : undefined
  const { bodyTimeoutMs, now } = opts
  // The secrets come from the `secret` function: finding them names a real tenant.
  const lookup = !opts.secrets && !opts.source
  // Anyone can make the receiver refuse: repeats of a line are counted, not written (log-window.ts).
  const lines = log ? createLogWindow(log, { now, hint: 'Each one is counted in stats() and passed to onResult.' }) : undefined

  /** Settles `result` with a row of the table and returns that row's answer. */
  function end(result: WebhookResult, name: AnswerName, error?: unknown): WebhookResponse {
    const answer = answers[name]
    result.outcome = ANSWER_ROWS[name].outcome
    if (name !== 'processed') result.code = name
    if (error !== undefined) result.error = error
    return answer
  }

  /**
   * The whole request path, in one async function (each layer of promises costs a turn of the
   * event loop per delivery): method, the checks before the body, the read, verify, dedupe or
   * enqueue, then the answer. Every way out sets `answer` and leaves the `flow` block.
   */
  async function receive(request: R, transport: WebhookTransport<R>): Promise<WebhookResponse> {
    // `durationMs` is for onResult only: without it, no clock reads for it.
    const started = onResult ? now() : 0
    const scope = telemetry?.receive()
    const result: WebhookResult = { outcome: 'processed', status: 0, durationMs: 0 }
    let answer: WebhookResponse
    // The `secret` lookup found this request's endpoint: its name is a real tenant's, not one made up in a URL.
    let tenantFound = false
    // The verified delivery, for the history's entry.
    let verified: VerifiedDelivery | undefined
    try {
      flow: {
        const method = transport.method(request)
        if (method !== undefined && method !== 'POST' && method.toUpperCase() !== 'POST') {
          answer = end(result, 'method_not_allowed')
          break flow
        }
        // Filled in as verification goes: the dedupe keys need the headers and secrets.
        const progress: VerifyProgress = {}
        let delivery: VerifiedDelivery
        try {
          const verified = verifyDelivery(request, transport, opts, true, progress)
          delivery = (verified instanceof Promise ? await verified : verified) as VerifiedDelivery
        } catch (error) {
          scope?.verified()
          tenantFound = lookup && progress.secrets !== undefined
          answer = await refuse(request, transport, result, error)
          break flow
        }
        scope?.verified()
        tenantFound = lookup
        verified = delivery
        const { signed, secrets } = progress as Required<VerifyProgress>
        const type = delivery.event.event
        result.id = delivery.id
        result.eventType = type
        result.signatureVersion = delivery.signatureVersion
        const handler = handlers?.get(type)
        if (handler === undefined && (!inbox || handlers)) {
          answer = end(result, 'ignored')
          break flow
        }
        let namespace = fixedNamespace
        if (namespace === undefined) {
          try {
            const name = await within((endpoint as EndpointLookup<R>)(request), opts.sourceSettings.readTimeoutMs)
            if (name === TIMED_OUT) throw new Error('the `endpoint` function did not answer within secretReadTimeoutMs.')
            if (typeof name !== 'string' || name.length === 0) throw new TypeError('the `endpoint` function returned no endpoint name.')
            result.endpoint = name
            namespace = endpointNamespace(name)
          } catch (error) {
            answer = end(result, 'secret_lookup_failed', error)
            break flow
          }
        } else result.endpoint = endpoint as string

        // A v2 signature covers the id, the dedupe key. A v1 signature does not (spec §6.2): its
        // replay key is what it signs. With allowV1, a v2 delivery holds both, so stripping its v2
        // header to replay it as v1 finds the completion too.
        const idKey = `${namespace}:${delivery.id}`
        let keys: string[]
        if (!opts.allowV1) keys = [idKey]
        else {
          const replayKey = await v1ReplayKey(namespace, signed, delivery, secrets)
          keys = delivery.signatureVersion === 'v2' ? [idKey, replayKey] : [replayKey]
        }
        // The one deadline for every engine call of this request, on the wall clock (a test's
        // fixed `now` would never pass it).
        const deadline = Date.now() + engineWaitMs
        const size = delivery.rawBody.byteLength
        if (heldRequests >= maxHeldRequests || heldBytes + size > maxHeldBytes) {
          answer = end(result, inbox ? 'inbox_unavailable' : 'store_unavailable', ownError(
            `svc-webhooks: ${heldRequests} requests (${heldBytes} body bytes) are already waiting for the ${inbox ? 'inbox' : 'store'} (maxHeld): answered 503 at once so the sender retries.`,
          ))
          break flow
        }
        heldRequests++
        heldBytes += size
        let holding = true
        const free = (): void => {
          if (!holding) return
          holding = false
          heldRequests--
          heldBytes -= size
        }
        if (inbox) {
          const { id, timestamp, signatureVersion, secretIndex, rawBody } = delivery
          try {
            const traceparent = scope?.traceparent()
            const receivedAt = now()
            // An inbox with `ordering` files the delivery under its key now, from the event parsed here.
            const filed = (inbox as Partial<FilingInbox>).fileAt?.(delivery.event, { keys, receivedAt })
            const appended = await appendWithin(inbox, {
              keys,
              endpoint: result.endpoint!,
              id,
              timestamp,
              signatureVersion,
              secretIndex,
              rawBody,
              receivedAt,
              ...(traceparent ? { traceparent } : {}),
              ...(filed && { filed }),
            }, deadline)
            answer = end(result, appended === 'accepted' ? 'accepted' : 'duplicate')
          } catch (error) {
            answer = end(result, 'inbox_unavailable', error)
          } finally {
            free()
          }
          break flow
        }
        const ran = claimRun(
          { store, keys, owner: nextOwner(), leaseMs, retentionMs, deadline },
          () => {
            free()
            const event = delivery as VerifiedDelivery<unknown>
            return scope ? scope.run(() => handler!(event.event, event)) : handler!(event.event, event)
          },
        )
        // A store that answers synchronously and a synchronous handler cost no turn of the event loop.
        let outcome: Awaited<typeof ran>
        try {
          outcome = typeof ran === 'string' ? ran : await ran
        } finally {
          free()
        }
        if (typeof outcome === 'string') {
          if (outcome === 'lease_lost') {
            result.error = ownError(
              'svc-webhooks: the handler outlasted `leaseMs`; another request may also have run it. Raise `leaseMs` or make the handler idempotent.',
            )
          }
          answer = end(result, CLAIM_ANSWERS[outcome])
        } else answer = end(result, CLAIM_ANSWERS[outcome.stage], outcome.error)
      }
    } catch (error) {
      answer = end(result, answerNameOf(error), error)
    }
    transport.discard?.(request, bodyTimeoutMs)
    result.status = answer.status
    if (onResult) result.durationMs = now() - started
    // Telemetry names an endpoint only once it is known: a name from the URL of a request that
    // did not verify would be a label anyone can make up.
    if (scope) endScope(scope, result, fixedNamespace !== undefined || tenantFound || result.signatureVersion !== undefined)
    report(result, tenantFound)
    try {
      history?.received(result, verified, now(), typeof endpoint === 'string' ? endpoint : undefined)
    } catch {
      // A history of your own that throws: the answer stands.
    }
    return answer
  }

  /** A refused delivery: what is known of it for the log line (the id as sent, the tenant), then its answer. */
  async function refuse(request: R, transport: WebhookTransport<R>, result: WebhookResult, error: unknown): Promise<WebhookResponse> {
    const sent = transport.header(request, HEADER_ID)
    if (typeof sent === 'string' && DELIVERY_ID.test(sent)) result.id = sent
    // Best effort, never fatal: the refusal stands on its own.
    if (typeof endpoint === 'function') {
      try {
        const name = await (endpoint as EndpointLookup<R>)(request)
        if (typeof name === 'string' && name.length > 0) result.endpoint = name
      } catch {
        // See above.
      }
    }
    return end(result, answerNameOf(error), error)
  }

  /**
   * Counts the answer, writes its line through the window, and calls `onResult`. Lines are
   * collapsed by code, and by endpoint too once the name is a real one (`tenantFound`, or a
   * verified delivery), so made-up names in URLs cannot open windows of their own.
   */
  function report(result: WebhookResult, tenantFound: boolean): void {
    counter.count(result.outcome, result.status, result.code, seenBySender(result), now)
    if (lines) {
      const line = resultLine(result)
      if (line) {
        const named = typeof endpoint === 'function' && result.endpoint !== undefined && (tenantFound || result.signatureVersion !== undefined)
        lines.write(`${result.status} ${result.code ?? result.outcome}${named ? `, endpoint ${printable(result.endpoint!)}` : ''}`, line, result.id)
      } else if (result.outcome === 'ignored' && result.eventType && !ignoredTypes.has(result.eventType) && ignoredTypes.size < 100) {
        ignoredTypes.add(result.eventType)
        log!(
          `svc-webhooks: 200 ignored (delivery ${result.id}): no handler for "${printable(result.eventType)}" in \`on\`; ` +
            'deliveries of this type are acknowledged unprocessed. (Logged once per type.)',
        )
      }
    }
    callHook(onResult, result)
  }

  async function stats(): Promise<ReceiverStats> {
    const stats = counter.snapshot()
    // A push queue (Cloudflare Queues) cannot be counted from inside: no figures then.
    const counted = inbox as Partial<WebhookInbox> | undefined
    if (typeof counted?.stats === 'function') stats.inbox = await counted.stats()
    if (watching) stats.endpoint = watching.view()
    return stats
  }
  const watching = watch?.start({ secret: options.secret, verify: (input) => verifySignature(input, options), now, store, inbox: inbox as Partial<WebhookInbox> | undefined }, log)
  telemetry?.observe?.('receiver', stats)

  return {
    options,
    receive,
    stats,
    close: () => watching?.stop(),
    history,
    replay: (id, name) => (history ? history.replay({ handlers, now }, id, name) : Promise.reject(new TypeError('svc-webhooks: replay needs the `history` option.'))),
    // A held body goes the same way as a framework's: `secret` and `endpoint` functions get the request as given.
    handle: (request) => receive(request as R, heldTransport as unknown as WebhookTransport<R>),
  }
}
