/**
 * The durable inbox contract (DESIGN.md "Durable inbox: accept now, process after"): the receiver
 * appends a verified delivery and answers 202 only once the append is acknowledged; workers take
 * deliveries under a lease, run the handler, and complete, retry or bury each one. Every engine
 * (MemoryInbox, RedisInbox, PostgresInbox) implements this interface and passes the same contract
 * suite (test/inbox/contract.ts).
 */

/** A verified delivery as the receiver appends it. The raw bytes are kept untouched. */
export interface InboxDelivery {
  /**
   * Its dedupe keys, first the primary one (`<endpoint>:<id>` for v2): the append is a duplicate
   * when any of them was accepted or processed within the retention window.
   */
  keys: readonly string[]
  /** The endpoint (dedupe namespace) it was received for. */
  endpoint: string
  /** `svc-webhook-id`. */
  id: string
  /** The signed timestamp, Unix seconds. */
  timestamp: number
  signatureVersion: 'v2' | 'v1'
  /** Index of the secret that matched. */
  secretIndex: number
  /** The body exactly as received. */
  rawBody: Uint8Array
  /** When it was accepted, in milliseconds since the epoch. */
  receivedAt: number
  /**
   * The W3C `traceparent` of the span that received it (with `telemetry`), so the worker's
   * process span joins the receive span's trace. Engines keep it with the delivery.
   */
  traceparent?: string
  /**
   * Where an ordered take files it (its key and order text), computed at append from the
   * inbox's `ordering`: the take places it without handing its body to a worker. Engines keep it
   * with the delivery; a worker whose ordering is not its inbox's ignores it and places the
   * delivery itself.
   */
  filed?: { key: string; order: string }
}

/** An inbox given an `ordering`: it tells where a delivery is filed at append (`InboxDelivery.filed`). */
export interface FilingInbox {
  /** The key and order of `event` by the inbox's `ordering`; undefined without one, or when its key function fails. */
  fileAt(event: unknown, delivery: Pick<InboxDelivery, 'keys' | 'receivedAt'>): { key: string; order: string } | undefined
}

/** A delivery taken by a worker: held under `lease` until completed, retried, buried or the lease expires. */
export interface InboxEntry extends InboxDelivery {
  /** Handler attempts whose result was recorded (`retry`): 0 on the first take. */
  attempts: number
  /**
   * Times the delivery was handed out by `take`, this take included, counted atomically by the
   * take itself. `takes - attempts - 1` takes ended with no recorded result: a worker that died
   * (a crash, OOM, kill -9) or lost its lease. The worker buries a delivery past its
   * `maxStalledCount` of those, so a delivery that kills its process costs a bounded number of crashes.
   */
  takes: number
  /**
   * Where the retry budget (the worker's `maxRetryAgeMs`) counts from, in milliseconds since the
   * epoch: `receivedAt`, or the time of the last `requeue`, so a requeued dead letter gets a full budget.
   */
  retriesSince: number
  /** The last attempt's error message, if any. */
  lastError?: string
  /** This take's lease token: only its holder may complete, retry, bury or extend the entry. */
  lease: string
}

/** A delivery that exhausted its retries, or was handed out too often with no result. */
export interface DeadLetter extends InboxDelivery {
  attempts: number
  /** Times it was handed out. */
  takes: number
  /** The last attempt's error message. */
  lastError: string
  /** When it was buried, in milliseconds since the epoch. */
  deadAt: number
}

/** What a health check or an alert reads. */
export interface InboxStats {
  /** Deliveries waiting or being processed (dead letters excluded). */
  depth: number
  /** Age of the oldest waiting or processing delivery, in milliseconds (0 when empty). */
  oldestAgeMs: number
  /** Deliveries whose handler failed at least once and will be tried again. */
  retrying: number
  /** Deliveries in the dead-letter list. */
  dead: number
  /** Whether the workers are paused (`worker.pause()`), on engines that keep a pause flag. */
  paused?: boolean
  /** Who paused, as given to `pause(by)`. */
  pausedBy?: string
  /** The rate limit the workers last asked for (`rateLimit.perSecond`), shared by all of them. */
  rateLimitPerSecond?: number
}

/** What an append found. */
export type AppendResult = 'accepted' | 'duplicate'

/**
 * Why an engine operation failed: `unavailable` (unreachable, timed out, connection dropped:
 * the same call may succeed later) or `refused` (the engine answered an error that repeating
 * will not fix: a value it cannot store, a size limit, Redis out of memory under `noeviction`).
 */
export type InboxErrorKind = 'unavailable' | 'refused'

/**
 * What every engine method rejects with. Its message names the operation and the kind, never
 * the command's arguments; `cause` is a plain `{ name, message }` summary of the client's error
 * (a client's own error object holds the command and its arguments, the body among them).
 *
 * @example
 * try { await inbox.append(delivery) } catch (error) { if (isInboxError(error) && error.kind === 'refused') alert(error) }
 */
export class InboxError extends Error {
  override readonly name = 'InboxError'
  /** `unavailable`: try again later; `refused`: the engine will keep refusing this call. */
  readonly kind: InboxErrorKind
  /** The engine operation, e.g. `RedisInbox.retry`. */
  readonly operation: string

  constructor(kind: InboxErrorKind, operation: string, message: string, options?: { cause?: { name: string; message: string } }) {
    super(message, options)
    this.kind = kind
    this.operation = operation
  }

  /** `instanceof` true for an error thrown by any copy of the package (an engine's entry carries its own). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // A subclass keeps the ordinary check: only the class itself answers by the brand.
    return this === InboxError ? isInboxError(value) : super[Symbol.hasInstance](value)
  }
}

/** Whether `error` is an {@link InboxError}, across realms and copies of the package. */
export function isInboxError(error: unknown): error is InboxError {
  return error instanceof Error && error.name === 'InboxError' && typeof (error as { kind?: unknown }).kind === 'string'
}

/**
 * A durable inbox. Every method may reject with an {@link InboxError}: `unavailable` when the
 * backing service is unreachable (the receiver then answers 503, the sender retries; a worker
 * waits and tries again), `refused` when it answered an error that repeating will not fix.
 *
 * `complete`, `retry` and `bury` are idempotent per lease: repeated by the same holder after one
 * that took effect (a reply lost in a dropped connection), they resolve true again, so a worker
 * retries an ack for as long as its lease lasts without running the handler twice.
 */
export interface WebhookInbox {
  /**
   * Appends `delivery` unless one of its keys was already accepted or processed: resolves only
   * once the append is durable (as durable as the engine is). `deadline` (wall-clock ms, as
   * `Date.now()`), when given, is when the receiver needs its answer: an engine that waits for
   * its server (a restart, a failover) keeps one attempt going until then rather than giving up
   * after its own `timeoutMs`.
   */
  append(delivery: InboxDelivery, deadline?: number): Promise<AppendResult>
  /** Leases up to `max` deliveries that are due, each for `visibilityMs`; an expired lease makes a delivery due again. */
  take(max: number, visibilityMs: number): Promise<InboxEntry[]>
  /** The handler succeeded: the entry leaves the inbox; its keys stay processed for the retention window. Resolves false when the lease was lost. */
  complete(entry: InboxEntry): Promise<boolean>
  /** The handler failed: due again in `delayMs`, with `attempts + 1` and `error` kept. Resolves false when the lease was lost. */
  retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean>
  /** Out of retries: moved to the dead-letter list with `error`. Resolves false when the lease was lost. */
  bury(entry: InboxEntry, error: string): Promise<boolean>
  /** Extends the lease while a slow handler runs. Resolves false when the lease was lost. */
  extend(entry: InboxEntry, visibilityMs: number): Promise<boolean>
  /** The dead letters, oldest first. */
  dead(limit?: number): Promise<DeadLetter[]>
  /**
   * Puts a dead letter (by its primary key) back in the inbox, due now, with its attempts and
   * takes reset and `retriesSince` set to now (a full retry budget). Resolves false when there is none.
   */
  requeue(key: string): Promise<boolean>
  /**
   * Deletes a dead letter (by its primary key) for good. Its dedupe keys stay processed for the
   * retention window, so a resend is answered 200 duplicate. Resolves false when there is none.
   */
  purge(key: string): Promise<boolean>
  /**
   * What in the engine's configuration breaks the durability the inbox promises (Redis without
   * `appendonly`, an eviction policy other than `noeviction`; Postgres with `fsync` or
   * `synchronous_commit` off): one line each, empty when none. When the settings cannot be read
   * (the server refuses or does not answer), one line saying so; it never rejects. The worker
   * logs them at start.
   */
  durabilityWarnings?(): Promise<string[]>
  /** Depth, oldest age, retrying, dead. */
  stats(): Promise<InboxStats>
}

/**
 * The receiver's side of an inbox: `append` only. What a push queue can offer (Cloudflare Queues:
 * the Worker's `queue()` consumer runs the handlers, so `take`, `stats` and the rest have no
 * meaning there); every {@link WebhookInbox} is one.
 */
export type WebhookInboxProducer = Pick<WebhookInbox, 'append'>

/** Options every engine takes. */
export interface InboxOptions {
  /**
   * How long the keys of a processed delivery are remembered, so a resend is answered 200 duplicate.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
}

