/**
 * Cloudflare Queues as the durable inbox (DESIGN.md "Durable inbox"): the fetch handler appends
 * each verified delivery to a Queue with {@link QueueInbox} and answers 202 once `send` resolved
 * (Queues resolve a send only once the message is stored); the Worker's `queue()` consumer,
 * {@link createQueueConsumer}, runs the handlers. A Queue cannot be searched, so dedupe lives in an
 * IdempotencyStore (the DurableObjectStore), as two records per delivery:
 *
 * - Accepted (the append): each dedupe key is claimed for `leaseMs` while `send` runs, then
 *   completed for `retentionMs`. A resend finds it completed: 200 duplicate, not sent again. One
 *   arriving while the first append is still sending finds it claimed and is refused (503, the
 *   sender retries): answering it "duplicate" would lose the delivery if that send then failed. A
 *   failed send releases the claim, so the sender's retry appends again. A crash between `send` and
 *   the completion leaves the claim to expire: a resend after `leaseMs` is sent a second time, and
 *   the processed record below keeps the handler from running twice.
 * - Processed (the consumer): Queues deliver at least once, so the primary key is claimed again,
 *   under {@link PROCESSED_PREFIX}, while the handler runs, and completed once it succeeded.
 *
 * Retries are the Queue's own: a failure is `message.retry({ delaySeconds })` with exponential
 * backoff (from 1 s, capped at 1 h), and after the consumer's `max_retries` the Queue moves the
 * message to its dead-letter queue, which is this inbox's dead-letter list. The inbox `stats()`
 * (depth, oldest age, retrying, dead) cannot be computed from a Worker: a Queue has no read or
 * count API for its producers; read its backlog in the Queue's metrics (dashboard, GraphQL API).
 */
import { fromBase64, toBase64 } from '../base64.js'
import type { WebhookHandler, WebhookHandlers } from '../contracts/handler.js'
import { claimRun } from '../claim.js'
import { DEFAULT_RETENTION_MS, isIdempotencyStore, type IdempotencyStore } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { callHook, lineSink, startupWarnings, type WebhookLog } from '../visibility.js'
import type { WebhookTelemetry } from '../telemetry.js'
import { type AppendResult, type InboxDelivery, type WebhookInboxProducer } from '../contracts/inbox.js'
import { processDelivery, retryDelay, type InboxWorkerResult, type ProcessPolicy } from './process.js'
import { storedError } from './text.js'
import { QUEUES_ORDERING_REFUSED, refuseOrdering } from './ordering-refused.js'

/** The parts of a Queue producer binding (`env.WEBHOOK_QUEUE`) the inbox uses (structural: no workers-types needed). */
export interface QueueProducerLike {
  send(body: QueuedDelivery, options?: { contentType?: 'json' }): Promise<unknown>
}

/** The parts of a Queue `Message` the consumer uses. */
export interface QueueMessageLike {
  readonly id: string
  readonly body: unknown
  /** Delivery attempts, this one included (1 on the first). */
  readonly attempts: number
  ack(): void
  retry(options?: { delaySeconds?: number }): void
}

/** The parts of a `MessageBatch` the consumer uses. */
export interface QueueBatchLike {
  readonly queue: string
  readonly messages: readonly QueueMessageLike[]
}

/** A delivery as a Queue message (JSON): {@link InboxDelivery} with the raw body in base64. */
export interface QueuedDelivery {
  /** The message format's version. */
  v: 1
  keys: string[]
  endpoint: string
  id: string
  timestamp: number
  signatureVersion: 'v2' | 'v1'
  secretIndex: number
  /** The raw body, base64. */
  body: string
  receivedAt: number
  /** The receive span's trace context, with `telemetry`. */
  traceparent?: string
}

/**
 * The largest body that fits a Queue message once base64-encoded (4/3 of it) with its keys:
 * Queues take 128 KB (128,000 bytes, about 100 of them metadata). `withWebhooks` with `queue`
 * uses it as the default `maxBodyBytes` and refuses a larger one.
 */
export const QUEUE_MAX_BODY_BYTES = 90 * 1024
const QUEUE_MAX_MESSAGE_BYTES = 127_900
// Queues refuse a delay over 24 h (12 h on older accounts).
const MAX_DELAY_SECONDS = 12 * 60 * 60

/**
 * Put before the primary key of a processed record. A receiver's key starts with its endpoint
 * namespace, where every `%` is written `%25` (endpointNamespace), so no receiver key starts so.
 */
const PROCESSED_PREFIX = '%processed:'

const encoder = new TextEncoder()

/** Options of {@link QueueInbox}. */
export interface QueueInboxOptions {
  /** Where accepted ids are kept: a `DurableObjectStore` (atomic across every instance of the Worker). */
  store: IdempotencyStore
  /**
   * How long an append holds its ids while it sends; an append that crashed frees them after this long.
   * @default 60000
   */
  leaseMs?: number
  /**
   * How long an accepted id is remembered, so a resend is answered 200 duplicate.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
}

/**
 * The receiver's side of a Queue inbox: appends each verified delivery to a Queue producer binding.
 * Resolves 'accepted' once `send` resolved, 'duplicate' for an id already accepted; rejects (the
 * receiver answers 503) when the store or the Queue fails, or another request is appending the id.
 *
 * @example
 * const inbox = new QueueInbox(env.WEBHOOK_QUEUE, { store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY) })
 * await inbox.append(delivery) // 'accepted'
 */
export class QueueInbox implements WebhookInboxProducer {
  readonly #queue: QueueProducerLike
  readonly #store: IdempotencyStore
  readonly #leaseMs: number
  readonly #retentionMs: number

  constructor(queue: QueueProducerLike, { store, leaseMs = 60_000, retentionMs = DEFAULT_RETENTION_MS }: QueueInboxOptions) {
    if (typeof queue?.send !== 'function') throw new TypeError('svc-webhooks: QueueInbox needs a Queue producer binding (env.WEBHOOK_QUEUE; [[queues.producers]] in wrangler.toml).')
    if (!isIdempotencyStore(store)) throw new TypeError('svc-webhooks: QueueInbox needs `store`, e.g. new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY): a Queue cannot tell a resend from a new delivery.')
    positiveOption(leaseMs, 'QueueInbox `leaseMs`')
    positiveOption(retentionMs, 'QueueInbox `retentionMs`')
    this.#queue = queue
    this.#store = store
    this.#leaseMs = leaseMs
    this.#retentionMs = retentionMs
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
    const { keys, endpoint, id, timestamp, signatureVersion, secretIndex, rawBody, receivedAt } = delivery
    const body: QueuedDelivery = {
      v: 1,
      keys: [...keys],
      endpoint,
      id,
      timestamp,
      signatureVersion,
      secretIndex,
      body: toBase64(rawBody),
      receivedAt,
      ...(delivery.traceparent ? { traceparent: delivery.traceparent } : {}),
    }
    const size = encoder.encode(JSON.stringify(body)).length
    if (size > QUEUE_MAX_MESSAGE_BYTES) {
      throw new RangeError(`svc-webhooks: delivery ${id} takes ${size} bytes as a Queue message; Queues take at most 128 KB. Keep \`maxBodyBytes\` at or under ${QUEUE_MAX_BODY_BYTES}.`)
    }
    const outcome = await claimRun(
      { store: this.#store, keys, owner: crypto.randomUUID(), leaseMs: this.#leaseMs, retentionMs: this.#retentionMs },
      () => this.#queue.send(body, { contentType: 'json' }),
    )
    // Not sent (the store failed, or `send` did): the ids were released, so the sender's retry
    // (after the 503) appends again.
    if (typeof outcome !== 'string') {
      // Sent, but not recorded: the claims expire after leaseMs, and the consumer's processed
      // record keeps a second copy from running the handler again.
      if (outcome.stage === 'complete') return 'accepted'
      throw outcome.error
    }
    if (outcome === 'completed') return 'duplicate'
    if (outcome === 'in_flight') throw new Error(`svc-webhooks: delivery ${id} is being appended by another request; the sender retries after the 503.`)
    return 'accepted'
  }
}

/** Options of {@link createQueueConsumer}. */
export interface QueueConsumerOptions {
  /** Handlers by event type, called as `handler(event, delivery)`, as in the receiver; `delivery.signal` is aborted past the deadline. */
  on: WebhookHandlers
  /** The store that keeps each id processed once: the same `DurableObjectStore` the inbox uses. */
  store: IdempotencyStore
  /**
   * How long a message's id is held while its handler runs. A copy delivered meanwhile is retried
   * after this long; a crashed consumer's id is free again after it. At least `handlerTimeoutMs`.
   * @default 900000 (15 min, a consumer invocation's wall-clock limit)
   */
  leaseMs?: number
  /**
   * The longest a handler may run: past it its `delivery.signal` is aborted and the message is
   * retried with backoff ("handler timed out after … ms"). Within a consumer invocation's 15 min,
   * and at most `leaseMs`.
   * @default 300000 (5 min), or `leaseMs` when that is shorter
   */
  handlerTimeoutMs?: number
  /**
   * How long a processed id is remembered.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * First retry delay; doubles on each failure up to `maxRetryDelayMs`. Queues count in whole seconds.
   * @default 1000
   */
  firstRetryDelayMs?: number
  /**
   * Longest retry delay.
   * @default 3600000 (1 h)
   */
  maxRetryDelayMs?: number
  /**
   * Where the consumer's lines go (a warning at creation for an `on` key that is no event type, a
   * handler's first failure and every fifth, a result that could not be recorded), as the worker's: a function taking one line, or false for none.
   * @default console.warn
   */
  log?: WebhookLog
  /** Called once per message with how it ended. May be sync or async; a throw or a rejection is swallowed. */
  onResult?: (result: InboxWorkerResult) => unknown
  /**
   * Traces and metrics (`openTelemetry()` from `svc-webhooks/opentelemetry`): a process span per
   * message, in the trace of the span that received the delivery.
   */
  telemetry?: WebhookTelemetry
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
  /**
   * Not available: Queues run batches in concurrent invocations with no order by key, so asking is
   * a TypeError that says why (use RedisInbox or PostgresInbox with `createInboxWorker({ ordering })`).
   */
  ordering?: never
}

/**
 * Creates the Worker's `queue()` consumer for deliveries a {@link QueueInbox} sent: runs each
 * handler once per id through the inbox worker's own processing path (store claim, the handler
 * under `handlerTimeoutMs`, ack on success, `retry({ delaySeconds })` with backoff on failure). A
 * type with no handler is acked without running. A message that is not a delivery is retried, so
 * the Queue dead-letters it after `max_retries` rather than dropping it: keep the Queue for
 * webhooks only. Crash loops are bounded by the Queue itself: its `attempts` count every
 * delivery of a message, crashed invocations included, up to `max_retries`.
 *
 * @example
 * // A consumer Worker of its own (the receiving Worker uses withWebhooks({ queue, store, ... })):
 * export default {
 *   queue: (batch: MessageBatch, env: Env) =>
 *     createQueueConsumer({ on: { 'message.received': save }, store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY) })(batch),
 * }
 */
export function createQueueConsumer(options: QueueConsumerOptions): (batch: QueueBatchLike) => Promise<void> {
  return queueConsumer(options, true)
}

/** {@link createQueueConsumer}; `warn` false where a receiver built alongside warns about the same `on`. */
function queueConsumer(options: QueueConsumerOptions, warn: boolean): (batch: QueueBatchLike) => Promise<void> {
  const { on, store, onResult, now = Date.now } = options
  const { leaseMs = 15 * 60 * 1000, retentionMs = DEFAULT_RETENTION_MS, firstRetryDelayMs = 1000, maxRetryDelayMs = 60 * 60 * 1000 } = options
  // Never longer than the claim: a shorter leaseMs given alone shortens the deadline with it.
  const { handlerTimeoutMs = Math.min(5 * 60 * 1000, leaseMs) } = options
  refuseOrdering('Cloudflare Queues', QUEUES_ORDERING_REFUSED, (options as { ordering?: unknown }).ordering)
  if (typeof on !== 'object' || on === null) throw new TypeError('svc-webhooks: the Queue consumer needs `on`, the handlers by event type.')
  if (!isIdempotencyStore(store)) throw new TypeError('svc-webhooks: the Queue consumer needs `store`, e.g. new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY): Queues deliver at least once.')
  for (const [name, value] of Object.entries({ leaseMs, handlerTimeoutMs, retentionMs, firstRetryDelayMs, maxRetryDelayMs })) positiveOption(value, `the Queue consumer \`${name}\``)
  if (handlerTimeoutMs > leaseMs) throw new TypeError('svc-webhooks: the Queue consumer `handlerTimeoutMs` must not exceed `leaseMs`: the id would be free while the handler still runs.')
  const lines = lineSink(options.log, 'queue consumer', now)
  // Once, at creation: a misspelled `on` key would ack every message of that type unprocessed.
  if (warn) for (const line of startupWarnings(on, undefined)) lines.once(line)

  // A logging hook must not turn a processed message into a retried one: callHook swallows its failures.
  const policy: ProcessPolicy = {
    handlers: on as Record<string, WebhookHandler<unknown> | undefined>,
    store,
    storeKey: (delivery) => PROCESSED_PREFIX + delivery.keys[0],
    claimMs: leaseMs,
    retentionMs,
    handlerTimeoutMs,
    // The Queue's own attempts (crashed invocations included) and max_retries bound both.
    maxStalledCount: Infinity,
    maxRetryAgeMs: Infinity,
    firstRetryDelayMs,
    maxRetryDelayMs,
    // Another copy is running (or crashed holding the id): look again once its claim is over.
    inFlightDelayMs: leaseMs,
    now,
    report: (result) => callHook(onResult, result),
    say: lines.say,
    inboxError: () => undefined,
    ...(options.telemetry && { telemetry: options.telemetry }),
  }

  async function handle(msg: QueueMessageLike): Promise<void> {
    // A Queue message is acked or retried by a plain call: nothing to wait for, nothing lost.
    const retry = async (delayMs: number): Promise<boolean> => {
      msg.retry({ delaySeconds: Math.min(MAX_DELAY_SECONDS, Math.max(1, Math.ceil(delayMs / 1000))) })
      return true
    }
    let delivery: InboxDelivery
    try {
      delivery = fromQueued(msg.body)
    } catch (error) {
      const retryInMs = retryDelay(msg.attempts, firstRetryDelayMs, maxRetryDelayMs)
      await retry(retryInMs)
      return callHook(onResult, { outcome: 'retrying', id: msg.id, endpoint: '', attempts: msg.attempts, error, retryInMs, durationMs: 0 })
    }
    await processDelivery(
      {
        delivery,
        attempts: msg.attempts,
        stalled: 0,
        retriesSince: delivery.receivedAt,
        owner: crypto.randomUUID(),
        acks: {
          complete: async () => (msg.ack(), true),
          retry,
        },
      },
      policy,
    )
  }

  return async (batch) => {
    const settled = await Promise.allSettled(batch.messages.map(handle))
    // An invocation may end before a summary's timer: write this batch's summaries now.
    lines.flush()
    // Throwing makes the Queue retry every message not acked or retried explicitly, never drop it.
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
    if (failed) throw new Error(`svc-webhooks: the Queue consumer failed: ${storedError(failed.reason)}`, { cause: failed.reason })
  }
}

function fromQueued(body: unknown): InboxDelivery {
  const m = (typeof body === 'object' && body !== null ? body : {}) as Partial<QueuedDelivery>
  const valid =
    m.v === 1 &&
    Array.isArray(m.keys) &&
    m.keys.length > 0 &&
    m.keys.every((key) => typeof key === 'string') &&
    typeof m.endpoint === 'string' &&
    typeof m.id === 'string' &&
    typeof m.timestamp === 'number' &&
    (m.signatureVersion === 'v2' || m.signatureVersion === 'v1') &&
    typeof m.secretIndex === 'number' &&
    typeof m.body === 'string' &&
    typeof m.receivedAt === 'number'
  if (!valid) throw new TypeError('svc-webhooks: the Queue message is not a delivery QueueInbox sent; keep this Queue for webhooks only.')
  const { keys, endpoint, id, timestamp, signatureVersion, secretIndex, body: base64, receivedAt, traceparent } = m as QueuedDelivery
  return { keys, endpoint, id, timestamp, signatureVersion, secretIndex, rawBody: fromBase64(base64), receivedAt, ...(typeof traceparent === 'string' ? { traceparent } : {}) }
}

/** What `withWebhooks` needs for its `queue` option, from its other options. */
export interface QueueWorkerOptions {
  on?: WebhookHandlers
  store?: IdempotencyStore
  inbox?: unknown
  maxBodyBytes?: number
  retentionMs?: number
  log?: WebhookLog
  handlerTimeoutMs?: number
  onQueueResult?: (result: InboxWorkerResult) => unknown
  telemetry?: WebhookTelemetry
}

/**
 * `withWebhooks`' queue mode: the receiver's `inbox` (a {@link QueueInbox}) and `maxBodyBytes`
 * (within a Queue message), and the consumer for the Worker's `queue()`. Throws on invalid options.
 */
export function queueWorker(queue: QueueProducerLike, options: QueueWorkerOptions) {
  const { on, store, inbox, maxBodyBytes = QUEUE_MAX_BODY_BYTES, retentionMs, log, handlerTimeoutMs, onQueueResult, telemetry } = options
  if (inbox !== undefined) throw new TypeError('svc-webhooks: give `queue` or `inbox`, not both: with `queue` the Queue is the inbox.')
  if (store === undefined) throw new TypeError('svc-webhooks: `queue` needs `store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY)`: a Queue cannot tell a resend from a new delivery.')
  if (!(maxBodyBytes <= QUEUE_MAX_BODY_BYTES)) throw new TypeError(`svc-webhooks: with \`queue\`, \`maxBodyBytes\` must be at most ${QUEUE_MAX_BODY_BYTES}: a Queue message holds 128 KB.`)
  // The receiver built from the same options warns about `on` once: the consumer stays quiet.
  const consume = queueConsumer({ on: on!, store, ...(retentionMs !== undefined && { retentionMs }), ...(log !== undefined && { log }), ...(handlerTimeoutMs !== undefined && { handlerTimeoutMs }), ...(onQueueResult && { onResult: onQueueResult }), ...(telemetry && { telemetry }) }, false)
  const producer = new QueueInbox(queue, { store, ...(retentionMs !== undefined && { retentionMs }) })
  return { receiver: { inbox: producer, maxBodyBytes }, consume }
}
