/**
 * What the job-queue engines (BullMQ, pg-boss) share: a delivery as a job's JSON data (the raw
 * body in base64, so no byte is re-encoded, and the token of the append that stored it), the
 * processing policy their processors hand to {@link processDelivery}, and the option checks.
 * Each engine file only says how its queue stores a job and how its worker acks one.
 */
import { BULLMQ_ORDERING_REFUSED, PG_BOSS_ORDERING_REFUSED, refuseOrdering } from '../inbox/ordering-refused.js'
import { fromBase64, toBase64 } from '../base64.js'
import type { WebhookHandler, WebhookHandlers } from '../contracts/handler.js'
import { DEFAULT_RETENTION_MS, isIdempotencyStore, type IdempotencyStore } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { MemoryStore } from '../stores/memory.js'
import { callHook, lineSink, startupWarnings, type WebhookLog } from '../visibility.js'
import type { WebhookTelemetry } from '../telemetry.js'
import { InboxError, type InboxDelivery } from '../contracts/inbox.js'
import type { InboxWorkerResult, ProcessPolicy } from '../inbox/process.js'
import { errorLabel } from '../log-window.js'

/** A delivery as a job's data (JSON): {@link InboxDelivery} with the raw body in base64. */
export interface DeliveryJobData {
  /** The format's version. */
  v: 1
  /**
   * Unique to the append that stored the job: a queue that already held the job id answers
   * as if it had stored it, and the token read back tells the two apart.
   */
  token: string
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

/** The job name engines give a delivery (a BullMQ job name, shown on dashboards). */
export const DELIVERY_JOB_NAME = 'webhook'

/**
 * Put before a processed record's key in the processors' `store`. A receiver's key starts with
 * its endpoint namespace, where every `%` is written `%25`, so no receiver key starts so.
 */
const PROCESSED_PREFIX = '%processed:'

/**
 * A fresh append token (also a store claim's owner).
 *
 * @example
 * const data = toJobData(delivery, appendToken())
 */
export function appendToken(): string {
  return crypto.randomUUID()
}

/**
 * `delivery` as job data, stamped with `token`.
 *
 * @example
 * await queue.add('webhook', toJobData(delivery, token), { jobId })
 */
export function toJobData(delivery: InboxDelivery, token: string): DeliveryJobData {
  const { keys, endpoint, id, timestamp, signatureVersion, secretIndex, rawBody, receivedAt, traceparent } = delivery
  return { v: 1, token, keys: [...keys], endpoint, id, timestamp, signatureVersion, secretIndex, body: toBase64(rawBody), receivedAt, ...(traceparent ? { traceparent } : {}) }
}

/**
 * The delivery in a job's data; throws a TypeError when the data is not one an engine inbox stored.
 *
 * @example
 * const delivery = fromJobData(job.data, 'BullMQInbox')
 */
export function fromJobData(data: unknown, engine: string): InboxDelivery {
  const m = (typeof data === 'object' && data !== null ? data : {}) as Partial<DeliveryJobData>
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
  if (!valid) throw new TypeError(`svc-webhooks: the job is not a delivery ${engine} stored; keep this queue for webhooks only.`)
  const { keys, endpoint, id, timestamp, signatureVersion, secretIndex, body, receivedAt, traceparent } = m as DeliveryJobData
  return { keys, endpoint, id, timestamp, signatureVersion, secretIndex, rawBody: fromBase64(body), receivedAt, ...(typeof traceparent === 'string' ? { traceparent } : {}) }
}

/**
 * An append that got no answer: the receiver answers 503 and the sender retries.
 *
 * @example
 * try { await send() } catch (error) { throw unavailable('PgBossInbox.append', error) }
 */
export function unavailable(operation: string, error: unknown): InboxError {
  const cause = error instanceof Error ? { name: error.name, message: error.message } : { name: 'Error', message: String(error) }
  // The message names the operation only: a client's error may quote the command and the body.
  return new InboxError('unavailable', operation, `svc-webhooks: ${operation} could not store the job (${errorLabel(error)}); the receiver answers 503 and the sender retries.`, { cause })
}

/** Options both engines' processors take. */
export interface EngineProcessorOptions {
  /** Handlers by event type, called as `handler(event, delivery)`, as in the receiver; `delivery.signal` is aborted past the deadline or when the engine takes the job back. */
  on: WebhookHandlers
  /**
   * Not available: neither BullMQ without Pro groups nor pg-boss can run one conversation's
   * deliveries one at a time in `message.created_at` order, so asking is a TypeError that says
   * why (use RedisInbox or PostgresInbox with `createInboxWorker({ ordering })`).
   */
  ordering?: never
  /**
   * Guards each delivery id with claim → run → complete, so a job the engine hands out again
   * after its handler succeeded (a worker killed before the ack reached the engine, a lock or
   * an expiry lost while the handler ran) does not run the handler a second time. Without it a
   * handler runs at least once per id; give one (a `RedisStore`, a `PostgresStore`) when a
   * second run would do harm. A handler past `handlerTimeoutMs` keeps its id claimed until it
   * settles, so the engine's retry meets `in_flight` and never runs beside it. The default holds
   * claims in this process only: a job retried on another worker process, or taken over from a
   * killed one, is not guarded by it.
   * @default a `MemoryStore` of this processor's own
   */
  store?: IdempotencyStore
  /**
   * How long a processed id stays in `store`, so a job handed out again later is completed
   * without running.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * Where the processor's lines go (a warning at creation for an `on` key that is no event type,
   * a handler's first failure and every fifth, a job sent to the dead letters), as the inbox
   * worker's: a function taking one line, or false for none.
   * @default console.warn
   */
  log?: WebhookLog
  /** Called once per job with how it ended. May be sync or async; a throw or a rejection is swallowed. */
  onResult?: (result: InboxWorkerResult) => unknown
  /**
   * Traces and metrics (`openTelemetry()` from `svc-webhooks/opentelemetry`): a process span per
   * job, in the trace of the span that received the delivery.
   */
  telemetry?: WebhookTelemetry
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
}

/**
 * The processing policy both processors share, with the engine bounding retries and stalls
 * (`maxStalledCount`, `maxRetryAgeMs` infinite: BullMQ's attempts and maxStalledCount, pg-boss's
 * retryLimit and expiry decide) and the store key made of the delivery's last dedupe key.
 *
 * @example
 * const policy = enginePolicy('BullMQ', options, { handlerTimeoutMs, claimMs: handlerTimeoutMs + 60_000, firstRetryDelayMs: 1000, maxRetryDelayMs: Infinity })
 */
export function enginePolicy(engine: string, options: EngineProcessorOptions, timing: { handlerTimeoutMs: number; claimMs: number; firstRetryDelayMs: number; maxRetryDelayMs: number }): ProcessPolicy {
  const { on, store, retentionMs = DEFAULT_RETENTION_MS, onResult, now = Date.now } = options
  if (typeof on !== 'object' || on === null) throw new TypeError(`svc-webhooks: the ${engine} processor needs \`on\`, the handlers by event type.`)
  refuseOrdering(engine, engine === 'BullMQ' ? BULLMQ_ORDERING_REFUSED : PG_BOSS_ORDERING_REFUSED, (options as { ordering?: unknown }).ordering)
  if (store !== undefined && !isIdempotencyStore(store)) throw new TypeError(`svc-webhooks: the ${engine} processor's \`store\` must be an IdempotencyStore (RedisStore, PostgresStore).`)
  positiveOption(retentionMs, `${engine} processor retentionMs`)
  const lines = lineSink(options.log, `${engine} processor`, now)
  // Once, at creation, as the receiver and the inbox worker do: a misspelled `on` key would
  // complete every job of that type as `ignored`, unprocessed.
  for (const line of startupWarnings(on, undefined)) lines.once(line)
  return {
    handlers: on as Record<string, WebhookHandler<unknown> | undefined>,
    // Never none: without a claim a handler past its deadline would run again beside itself.
    store: store ?? new MemoryStore(),
    // The last key: with `allowV1` a v2 delivery's keys end with its v1 replay key, the only key
    // a v1-only resend of it has, so both forms of one delivery share one processed record.
    storeKey: (delivery) => PROCESSED_PREFIX + delivery.keys[delivery.keys.length - 1],
    claimMs: timing.claimMs,
    retentionMs,
    handlerTimeoutMs: timing.handlerTimeoutMs,
    maxStalledCount: Infinity,
    maxRetryAgeMs: Infinity,
    firstRetryDelayMs: timing.firstRetryDelayMs,
    maxRetryDelayMs: timing.maxRetryDelayMs,
    // Another run holds the id (or crashed holding it): look again once its claim is over.
    inFlightDelayMs: timing.claimMs,
    now,
    report: (result) => callHook(onResult, result),
    say: lines.say,
    inboxError: () => undefined,
    ...(options.telemetry && { telemetry: options.telemetry }),
  }
}

/** How a job ended, as the processor's acks recorded it. */
export type Settlement = { ack: 'complete' } | { ack: 'retry'; delayMs: number; error: string } | { ack: 'bury'; error: string }
