/**
 * `svc-webhooks/pg-boss`: pg-boss as the durable inbox (DESIGN.md "Observability in the stack
 * teams run"), for teams that already run it. {@link PgBossInbox} sends each verified delivery
 * to the user's queue as a job, and {@link createPgBossHandler} is the handler for the user's own
 * `boss.work(queue, handler)`: it runs the handlers through the inbox worker's one processing
 * path (processDelivery) and answers pg-boss the pg-boss way: resolve (completed) or throw
 * (retried by the queue's `retryLimit`, `retryDelay` and `retryBackoff`, then moved to its
 * `deadLetter` queue).
 *
 * Dedupe is by job id, not by singleton key. pg-boss ids are UUIDs, so the id is a name-based
 * UUID of the delivery's primary dedupe key (version 5: SHA-1 over a namespace and the key). A
 * job row keeps its id from the send until `deleteAfterSeconds` after it completed or failed,
 * whatever the queue's policy, so an id sent again within that time inserts nothing: "accepted or
 * processed within retention" is a duplicate. A singleton key only blocks a second job while the
 * first is queued or active (which states depends on the policy, and not at all on `standard`), so
 * a resend after processing would run again. pg-boss is not imported: the inbox takes `boss` by
 * its `send` method. The SHA-1 is node:crypto's: pg-boss runs only where it exists (Node, Bun,
 * Deno), and WebCrypto's asynchronous digest costs as much CPU as the rest of an append's own work.
 */
import { createHash } from 'node:crypto'
import { type AppendResult, type InboxDelivery, type WebhookInboxProducer } from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import { processDelivery, type InboxWorkerResult } from '../inbox/process.js'
import { positiveOption } from '../option-checks.js'
import { withDeadline } from '../clients/deadline.js'
import { isNotAsPrepared, statementName } from '../clients/postgres.js'
import { appendToken, enginePolicy, fromJobData, toJobData, unavailable, type EngineProcessorOptions, type Settlement } from './job-data.js'

export type { DeliveryJobData } from './job-data.js'
export type { InboxWorkerResult } from '../inbox/process.js'

/** The parts of a `PgBoss` instance the inbox uses. */
export interface PgBossLike {
  send(name: string, data: object, options?: Record<string, unknown>): Promise<string | null>
  /** pg-boss's own database (its `pg` pool), through which each send runs as a prepared statement. */
  getDb?(): PgBossDbLike
}

/** The parts of pg-boss's database the inbox uses: `executeSql` passing a `pg` query config through to its pool. */
export interface PgBossDbLike {
  executeSql(text: string | { name: string; text: string }, values?: unknown[]): Promise<{ rows: unknown[] }>
  /** Set on pg-boss's own database (not on one a user supplied as `db`, which may not take a query config). */
  readonly _pgbdb?: boolean
}

/** The parts of a pg-boss job the handler uses (`boss.work` hands an array of them). */
export interface PgBossJobLike {
  readonly id: string
  readonly data: unknown
  /** Retries so far: 0 on the first attempt. */
  readonly retryCount: number
  /** How long pg-boss lets the job run before it fails it. */
  readonly expireInSeconds?: number
  /** Aborted when pg-boss takes the job back (expired, shutting down). */
  readonly signal?: AbortSignal
}

/** What a `perJobResults` handler resolves per job. */
export interface PgBossJobResult {
  id: string
  status: 'completed' | 'failed' | 'deadletter'
  output?: object
}

/** Options of {@link PgBossInbox}. */
export interface PgBossInboxOptions {
  /** The user's started `PgBoss`. */
  boss: PgBossLike
  /** The queue's name (create it first: `await boss.createQueue(queue, { deadLetter, retryLimit, ... })`). */
  queue: string
  /**
   * How long a completed job (and so its id) is kept: a resend within it is answered 200
   * duplicate. Sent with each job as `deleteAfterSeconds`.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * Longest wait for one append, retries included: past it the append rejects and the receiver
   * answers 503 (the sender retries).
   * @default 2000
   */
  timeoutMs?: number
  /**
   * Options for each `send` (`priority`, `retryLimit`, ...); `id`, `singletonKey` and `deleteAfterSeconds` are the inbox's own.
   * A `db` of your own (a transaction) is used as given; otherwise each send runs as a prepared statement on pg-boss's own pool.
   */
  sendOptions?: Record<string, unknown>
}

/** The UUID namespace of delivery job ids (5d0e6c57-1f4b-4a3e-9a41-2c836f0bd974): a v4 UUID picked for this purpose, so no other v5 names collide. */
const NAMESPACE = new Uint8Array([0x5d, 0x0e, 0x6c, 0x57, 0x1f, 0x4b, 0x4a, 0x3e, 0x9a, 0x41, 0x2c, 0x83, 0x6f, 0x0b, 0xd9, 0x74])

/**
 * The name-based UUID (RFC 9562 version 5: SHA-1 over the namespace and the key) pg-boss gets as
 * the job id of a delivery: the same key always gives the same id.
 *
 * @example
 * pgBossJobId('default:evt_1') // 'cc400d94-ed63-505d-aa7a-8fcdb6dee08c'
 */
export function pgBossJobId(key: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(key, 'utf8').digest().subarray(0, 16)
  hash[6] = (hash[6]! & 0x0f) | 0x50
  hash[8] = (hash[8]! & 0x3f) | 0x80
  const hex = Array.from(hash, (b) => b.toString(16).padStart(2, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/**
 * The receiver's side of a pg-boss inbox: sends each verified delivery to `queue` with an id
 * from its primary dedupe key. Resolves 'accepted' once the job row is committed, 'duplicate'
 * when the queue already holds that id (accepted, or processed within `retentionMs`); rejects
 * (the receiver answers 503) when Postgres does not answer within `timeoutMs`.
 *
 * @example
 * await boss.createQueue('webhooks-dead')
 * await boss.createQueue('webhooks', { retryLimit: 10, retryBackoff: true, deadLetter: 'webhooks-dead' })
 * const receiver = createWebhookReceiver({ secret, inbox: new PgBossInbox({ boss, queue: 'webhooks' }) })
 */
export class PgBossInbox implements WebhookInboxProducer {
  private readonly boss: PgBossLike
  private readonly queue: string
  private readonly timeoutMs: number
  private readonly sendOptions: Record<string, unknown>
  private readonly prepared: PreparedSends | undefined

  constructor({ boss, queue, retentionMs = DEFAULT_RETENTION_MS, timeoutMs = 2000, sendOptions = {} }: PgBossInboxOptions) {
    if (typeof boss?.send !== 'function') throw new TypeError('svc-webhooks: PgBossInbox needs `boss`, a started PgBoss: new PgBossInbox({ boss, queue }).')
    if (typeof queue !== 'string' || queue.length === 0) throw new TypeError('svc-webhooks: PgBossInbox needs `queue`, the name of a queue made with boss.createQueue().')
    positiveOption(retentionMs, 'PgBossInbox retentionMs')
    positiveOption(timeoutMs, 'PgBossInbox timeoutMs')
    this.boss = boss
    this.queue = queue
    this.timeoutMs = timeoutMs
    this.sendOptions = { ...sendOptions, deleteAfterSeconds: Math.ceil(retentionMs / 1000) }
    this.prepared = sendOptions.db === undefined ? PreparedSends.over(boss) : undefined
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
    const key = delivery.keys[0]!
    const id = pgBossJobId(key)
    const data = toJobData(delivery, appendToken())
    // The key as the singleton key too: on a queue whose policy allows one queued or active job
    // per singleton key (short, singleton, stately, exclusive), a send without one would find the
    // job of another delivery and be answered "duplicate", a delivery lost. Per delivery, the
    // policy can only ever refuse the same delivery; key_strict_fifo requires a key anyway.
    const options = { ...this.sendOptions, id, singletonKey: key, ...this.prepared?.sendOption() }
    let sent: string | null
    try {
      // The insert is one statement on the id's primary key: a second send of the id (this one
      // retried after a lost reply, or a resend racing it) waits for the first to commit and
      // inserts nothing. A lost reply makes a stored job look like a duplicate: still no loss.
      sent = await withDeadline('PgBossInbox.append', this.timeoutMs, () => this.boss.send(this.queue, data, options))
    } catch (error) {
      throw unavailable('PgBossInbox.append', error)
    }
    return sent === null ? 'duplicate' : 'accepted'
  }
}

/**
 * Runs pg-boss's job insert as a named (prepared) statement on its own pool, through the `db`
 * option of `send`. pg-boss sends the insert (about 4 KB of SQL) unnamed, so Postgres parses and
 * plans it for every job: most of the database's work on an append. Named, each connection parses
 * it once and Postgres settles on a generic plan; the statement is pg-boss's own text, named by
 * its hash, so a changed text (another table, notify on) is another statement. A connection that
 * does not keep prepared statements (PgBouncer in transaction mode before 1.21) fails the named
 * statement before inserting anything (`isNotAsPrepared`): the inbox then sends unnamed from
 * there on, and the append's retry runs at once.
 */
class PreparedSends {
  private names = new Map<string, string>()
  private off = false
  private readonly db: { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> }

  private constructor(private readonly own: PgBossDbLike) {
    this.db = {
      executeSql: (text, values) => {
        if (this.off) return this.own.executeSql(text, values)
        return this.own.executeSql({ name: this.nameOf(text), text }, values).catch((error: unknown) => {
          if (isNotAsPrepared(error)) this.off = true
          throw error
        })
      },
    }
  }

  /** Prepared sends over `boss`'s own database, or none (an older pg-boss, or a database of the user's). */
  static over(boss: PgBossLike): PreparedSends | undefined {
    if (typeof boss.getDb !== 'function') return undefined
    let db: PgBossDbLike | undefined
    try {
      db = boss.getDb()
    } catch {
      return undefined
    }
    return db?._pgbdb === true && typeof db.executeSql === 'function' ? new PreparedSends(db) : undefined
  }

  /** The `db` option of a send: none once the connections proved not to keep prepared statements. */
  sendOption(): { db: PreparedSends['db'] } | undefined {
    return this.off ? undefined : { db: this.db }
  }

  private nameOf(text: string): string {
    let name = this.names.get(text)
    if (name === undefined) {
      // One text per queue table and notify setting: a handful at most, bounded all the same.
      if (this.names.size >= 16) this.names.clear()
      name = statementName(text)
      this.names.set(text, name)
    }
    return name
  }
}

/** Options of {@link createPgBossHandler}. */
export interface PgBossHandlerOptions extends EngineProcessorOptions {
  /**
   * The longest a handler may run, at most the job's `expireInSeconds` (pg-boss fails a job
   * active longer). Past it `delivery.signal` is aborted and the job is failed for pg-boss to retry.
   * @default the job's expireInSeconds (15 min unless the queue sets it)
   */
  handlerTimeoutMs?: number
  /**
   * Resolve a `JobResult[]` for `boss.work(queue, { batchSize, perJobResults: true }, handler)`:
   * each job of a batch is settled on its own. Without it a batch with one failure fails as a
   * whole, and its other jobs run again (once more each: give `store` to run them once).
   * @default false
   */
  perJobResults?: boolean
}

/** The expiry pg-boss gives a job when the queue sets none. */
const PG_BOSS_EXPIRE_MS = 15 * 60 * 1000
/**
 * How much longer than the handler's deadline a store claim lasts (the completion's round trip).
 * Short on purpose: a job whose worker died mid-handler is fetched again once it expired, and
 * should find the claim over by then, since a claim still held there costs one of its retries.
 */
const CLAIM_MARGIN_MS = 10_000

/**
 * Creates the handler for the user's own `boss.work(queue, handler)`: each job of the batch
 * pg-boss hands it runs its handler through the inbox worker's processing path. Resolves when
 * every handler succeeded (pg-boss completes the jobs); throws the failure otherwise, so pg-boss
 * retries by the queue's `retryLimit`/`retryDelay`/`retryBackoff` and then moves the job to the
 * queue's `deadLetter` queue. With `store`, a handler runs once per id even when pg-boss hands a
 * job out again (expired while its worker was gone).
 *
 * @example
 * await boss.work('webhooks', createPgBossHandler({ on: { 'message.received': save } }))
 */
export function createPgBossHandler(options: PgBossHandlerOptions & { perJobResults: true }): (jobs: readonly PgBossJobLike[]) => Promise<PgBossJobResult[]>
export function createPgBossHandler(options: PgBossHandlerOptions): (jobs: readonly PgBossJobLike[]) => Promise<void>
export function createPgBossHandler(options: PgBossHandlerOptions): (jobs: readonly PgBossJobLike[]) => Promise<void | PgBossJobResult[]> {
  const { handlerTimeoutMs, perJobResults = false } = options
  if (handlerTimeoutMs !== undefined) positiveOption(handlerTimeoutMs, 'createPgBossHandler handlerTimeoutMs')
  const deadline = handlerTimeoutMs ?? PG_BOSS_EXPIRE_MS
  const policy = enginePolicy('pg-boss', options, { handlerTimeoutMs: deadline, claimMs: deadline + CLAIM_MARGIN_MS, firstRetryDelayMs: 1000, maxRetryDelayMs: 60 * 60 * 1000 })

  async function settle(job: PgBossJobLike): Promise<{ result: PgBossJobResult; error?: unknown }> {
    let delivery: InboxDelivery
    try {
      delivery = fromJobData(job.data, 'PgBossInbox')
    } catch (error) {
      return { result: { id: job.id, status: perJobResults ? 'deadletter' : 'failed' }, error }
    }
    // pg-boss fails a job active past its expiry: the handler's deadline is within it.
    const expiresMs = typeof job.expireInSeconds === 'number' && job.expireInSeconds > 0 ? job.expireInSeconds * 1000 : PG_BOSS_EXPIRE_MS
    const timeoutMs = Math.min(handlerTimeoutMs ?? expiresMs, expiresMs)
    let settled: Settlement | undefined
    let report: InboxWorkerResult | undefined
    await processDelivery(
      {
        delivery,
        attempts: job.retryCount + 1,
        stalled: 0,
        retriesSince: delivery.receivedAt,
        owner: appendToken(),
        // The acks only note the answer: pg-boss records it once the handler resolves or throws.
        acks: {
          complete: async () => ((settled = { ack: 'complete' }), true),
          retry: async (delayMs, error) => ((settled = { ack: 'retry', delayMs, error }), true),
          // Only a per-job result can skip pg-boss's retries; a plain handler's failure is retried.
          ...(perJobResults && { bury: async (error: string) => ((settled = { ack: 'bury', error }), true) }),
        },
        ...(job.signal && { abort: job.signal }),
      },
      { ...policy, handlerTimeoutMs: timeoutMs, claimMs: timeoutMs + CLAIM_MARGIN_MS, report: (r) => ((report = r), policy.report(r)) },
    )
    const outcome = settled as Settlement | undefined
    if (outcome === undefined || outcome.ack === 'complete') return { result: { id: job.id, status: 'completed' } }
    const error = report?.error instanceof Error ? report.error : new Error(outcome.error)
    return { result: { id: job.id, status: outcome.ack === 'bury' ? 'deadletter' : 'failed', output: { message: outcome.error } }, error }
  }

  return async (jobs) => {
    const settled = await Promise.all(jobs.map(settle))
    if (perJobResults) return settled.map((s) => s.result)
    const failed = settled.filter((s) => s.result.status !== 'completed')
    if (failed.length === 0) return
    if (jobs.length === 1) throw failed[0]!.error
    throw new AggregateError(failed.map((s) => s.error), `svc-webhooks: ${failed.length} of ${jobs.length} deliveries in the batch failed; pg-boss retries the batch (use perJobResults to settle each on its own).`)
  }
}
