/**
 * `svc-webhooks/bullmq`: BullMQ as the durable inbox (DESIGN.md "Observability in the stack teams
 * run"), for teams that already run it. {@link BullMQInbox} adds each verified delivery to the
 * user's `Queue` as a job whose id is made of the delivery's primary dedupe key, and
 * {@link createBullMQProcessor} is the processor for the user's own `Worker`: it runs the
 * handlers through the inbox worker's one processing path (processDelivery) and answers BullMQ
 * the BullMQ way: return (completed), throw (retried by the job's `attempts` and `backoff`),
 * throw an `UnrecoverableError` (failed at once: the failed set is the dead-letter list).
 *
 * Dedupe is BullMQ's own: adding a job id the queue holds stores nothing and answers that id, so
 * an id accepted and not yet removed is a duplicate. BullMQ's add answers the id either way, so the
 * add runs in one Redis transaction with an `EXISTS` of the job before it, which tells the two
 * apart in the same round trip. Each job is added with `removeOnComplete` of the retention window
 * (72 h), so a processed id stays known that long. bullmq is not imported: both sides take the
 * objects by the methods they use.
 */
import { type AppendResult, type InboxDelivery, type WebhookInboxProducer } from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import { processDelivery, type InboxWorkerResult, type Job as ProcessJob } from '../inbox/process.js'
import { printable } from '../log-window.js'
import { positiveOption } from '../option-checks.js'
import { withDeadline } from '../clients/deadline.js'
import { isRedisCluster, redisClientKind, requireHashTag } from '../clients/redis-keys.js'
import { appendToken, DELIVERY_JOB_NAME, type DeliveryJobData, enginePolicy, fromJobData, toJobData, unavailable, type EngineProcessorOptions, type Settlement } from './job-data.js'

export type { DeliveryJobData } from './job-data.js'
export type { InboxWorkerResult } from '../inbox/process.js'

/** The parts of a BullMQ `Queue` the inbox uses. */
export interface BullMQQueueLike {
  readonly name: string
  add(name: string, data: DeliveryJobData, opts?: { jobId?: string }): Promise<{ id?: string }>
  getJob(jobId: string): Promise<{ data?: unknown } | undefined | null>
  readonly defaultJobOptions?: { attempts?: number }
  /**
   * BullMQ 6's Redis backend: its connection, the add that joins a transaction (what a flow's
   * adds use), and `getJobData`, a job's fields without building a Job.
   */
  readonly backend?: {
    getJobData?(jobId: string): Promise<{ data?: unknown } | undefined | null>
    readonly client?: Promise<unknown>
    addJobToTransaction?(transaction: { runCommand(name: string, args: unknown[]): unknown }, job: unknown, jobId: string, parent: { parentKey?: string; parentDependenciesKey?: string }): Promise<unknown>
  }
  /** The Redis key of `type` (a job's hash for a job id). */
  toKey?(type: string): string
  readonly opts?: { telemetry?: unknown }
  emit?(event: 'waiting', job: unknown): unknown
}

/**
 * The queue's Job class (`queue.Job`, protected in BullMQ's types, there for subclasses), which
 * shapes and checks a job before an add, as `Queue.add` uses it.
 */
type JobClass = new (queue: never, name: string, data: unknown, opts: Record<string, unknown>, id: string) => NewJobLike

/** A job made for an add: BullMQ's `Job` before it is stored. */
interface NewJobLike {
  readonly parentKey?: string
  asJSON(): unknown
  validateOptions(json: unknown): void
}

/** The parts of the queue's ioredis client the inbox uses: a raw command, and the scripts BullMQ defined on it. */
interface RawRedisLike {
  readonly isCluster?: boolean
  readonly options?: { enableAutoPipelining?: boolean }
  call(command: string, ...args: unknown[]): Promise<unknown>
  readonly scriptsSet?: Record<string, { readonly sha?: string; readonly lua?: string; readonly numberOfKeys?: number | null } | undefined>
}

/** A job insert as BullMQ's backend would run it: the script's name and its keys and arguments. */
interface RecordedAdd {
  name: string
  args: unknown[]
}

/** The parts of a BullMQ `Job` the processor uses. */
export interface BullMQJobLike {
  readonly id?: string
  readonly data: unknown
  /** Failed attempts so far. */
  readonly attemptsMade: number
  readonly opts: { attempts?: number; backoff?: number | { type?: string; delay?: number } }
  moveToDelayed(timestamp: number, token?: string): Promise<void>
}

/** Options of {@link BullMQInbox}. */
export interface BullMQInboxOptions {
  /** The user's BullMQ `Queue` (keep it for webhooks: the processor fails any other job). */
  queue: BullMQQueueLike
  /**
   * How long a completed job (and so its id) is kept: a resend within it is answered 200
   * duplicate. Set on each job as `removeOnComplete: { age }`.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * Longest wait for one append, retries included: past it the append rejects and the receiver
   * answers 503 (the sender retries), whatever the client's reconnect settings.
   * @default 2000
   */
  timeoutMs?: number
  /**
   * Options for each job, over the queue's `defaultJobOptions` and these defaults: `attempts: 18`
   * with `backoff: { type: 'exponential', delay: 1000 }` (about 36 h of retries) when the queue
   * sets no `attempts`. `jobId`, `removeOnComplete` and `deduplication` are the inbox's own.
   */
  jobOptions?: Record<string, unknown>
}

/** The retries a delivery gets when neither the queue nor `jobOptions` sets `attempts`: 1 s doubling, the last wait about 18 h. */
const DEFAULT_RETRIES = { attempts: 18, backoff: { type: 'exponential', delay: 1000 } }

/**
 * A BullMQ job id for a dedupe key. BullMQ refuses ids with `:` (its key separator), which every
 * key holds (`<endpoint>:<id>`): `%` and `:` are percent-encoded, so distinct keys stay distinct.
 *
 * @example
 * bullmqJobId('default:evt_1') // 'default%3Aevt_1'
 */
export function bullmqJobId(key: string): string {
  return key.replace(/%/g, '%25').replace(/:/g, '%3A')
}

/**
 * The receiver's side of a BullMQ inbox: adds each verified delivery to `queue` as a job
 * (id from its primary dedupe key, data {@link DeliveryJobData}). Resolves 'accepted' once Redis
 * stored the job, 'duplicate' when the queue already held its id (accepted, or processed within
 * `retentionMs`); rejects (the receiver answers 503) when Redis does not answer within `timeoutMs`.
 * One round trip per append on BullMQ 6 (see docs/inbox-engines.md for the queue's connection
 * settings a hot producer wants); two where the queue does not offer a transaction's add.
 *
 * @example
 * const queue = new Queue('webhooks', { connection })
 * const receiver = createWebhookReceiver({ secret, inbox: new BullMQInbox({ queue }) })
 */
export class BullMQInbox implements WebhookInboxProducer {
  private readonly queue: BullMQQueueLike
  private readonly timeoutMs: number
  private readonly jobOptions: Record<string, unknown>

  constructor({ queue, retentionMs = DEFAULT_RETENTION_MS, timeoutMs = 2000, jobOptions = {} }: BullMQInboxOptions) {
    if (typeof queue?.add !== 'function' || typeof queue.getJob !== 'function') {
      throw new TypeError('svc-webhooks: BullMQInbox needs `queue`, a BullMQ Queue: new BullMQInbox({ queue: new Queue(name, { connection }) }).')
    }
    positiveOption(retentionMs, 'BullMQInbox retentionMs')
    positiveOption(timeoutMs, 'BullMQInbox timeoutMs')
    checkClusterQueue(queue)
    this.queue = queue
    this.timeoutMs = timeoutMs
    const retries = queue.defaultJobOptions?.attempts === undefined ? DEFAULT_RETRIES : {}
    // A queue-wide deduplication id would make every delivery after the first a "duplicate" (a
    // delivery lost): the job id is the only dedupe the inbox keeps.
    this.jobOptions = { ...retries, ...jobOptions, removeOnComplete: { age: Math.ceil(retentionMs / 1000) }, deduplication: undefined }
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
    const jobId = bullmqJobId(delivery.keys[0]!)
    const token = appendToken()
    const data = toJobData(delivery, token)
    let result: AppendResult
    try {
      // Adding the same id twice stores nothing the second time, so a retried add (its reply lost
      // in a reconnect) is safe: at worst it is answered duplicate, the job stored.
      result = await withDeadline('BullMQInbox.append', this.timeoutMs, async () => (await this.addInTransaction(jobId, data)) ?? this.addAndReadBack(jobId, data, token))
    } catch (error) {
      throw unavailable('BullMQInbox.append', error)
    }
    return result
  }

  /**
   * The add in one round trip: `MULTI`, `EXISTS` of the job's hash, BullMQ's own add script (by
   * its SHA, as BullMQ's backend builds the call), `EXEC`. Redis runs the two as one, so the
   * `EXISTS` says whether this add stored the job (0) or found it there (1): BullMQ's add answers
   * the job id either way. The four commands are sent in one synchronous step on the queue's
   * connection, so no other command of this process comes between them. (ioredis' own `multi()`
   * would send the whole script text with every transaction: a pipeline's scripts are sent by
   * SHA only once a socket has run them, and a pipeline writes through a stream of its own.)
   * Undefined where the queue does not offer what this takes (another BullMQ, a client that is
   * not ioredis, a cluster, ioredis' auto-pipelining), and with BullMQ telemetry on, which only
   * `queue.add` records: the add and a read-back then.
   */
  private async addInTransaction(jobId: string, data: DeliveryJobData): Promise<AppendResult | undefined> {
    const queue = this.queue
    const { backend, toKey } = queue
    const Job = (queue as { Job?: JobClass }).Job
    if (typeof backend?.addJobToTransaction !== 'function' || typeof Job !== 'function' || typeof toKey !== 'function' || queue.opts?.telemetry !== undefined) return undefined
    const client = (await backend.client) as RawRedisLike | undefined
    // With auto-pipelining, ioredis sends MULTI at once and the other three on the next tick:
    // another append's commands could come between them.
    if (typeof client?.call !== 'function' || client.isCluster === true || client.options?.enableAutoPipelining === true || typeof client.scriptsSet !== 'object') return undefined
    // As Queue.add does: the queue's defaults, then the job's options, then the id.
    const job = new Job(queue as never, DELIVERY_JOB_NAME, data, { ...queue.defaultJobOptions, ...this.jobOptions, jobId }, jobId)
    const json = job.asJSON()
    job.validateOptions(json)
    // The backend picks the script (standard, delayed, prioritized) and builds its keys and arguments.
    const recorded: RecordedAdd[] = []
    const recorder = { runCommand: (name: string, args: unknown[]) => (recorded.push({ name, args }), recorder) }
    await backend.addJobToTransaction(recorder, json, jobId, { parentKey: job.parentKey, parentDependenciesKey: job.parentKey ? `${job.parentKey}:dependencies` : '' })
    const add = recorded.length === 1 ? recorded[0]! : undefined
    const script = add && client.scriptsSet[add.name]
    if (!add || typeof script?.sha !== 'string' || typeof script.numberOfKeys !== 'number') return undefined
    const key = toKey.call(queue, jobId)
    const run = async (): Promise<unknown> => {
      const sent = [client.call('MULTI'), client.call('EXISTS', key), client.call('EVALSHA', script.sha, script.numberOfKeys, ...add.args), client.call('EXEC')]
      const settled = await Promise.allSettled(sent)
      const exec = settled[3]!
      if (exec.status === 'rejected') throw settled.find((s): s is PromiseRejectedResult => s.status === 'rejected' && s !== exec)?.reason ?? exec.reason
      return exec.value
    }
    let replies = await run()
    const noScript = (r: unknown) => Array.isArray(r) && r[1] instanceof Error && r[1].message.startsWith('NOSCRIPT')
    if (noScript(replies) && typeof script.lua === 'string') {
      // Redis lost its scripts (a SCRIPT FLUSH, a failover): nothing was added. Load it and run again.
      await client.call('SCRIPT', 'LOAD', script.lua)
      replies = await run()
    }
    if (!Array.isArray(replies) || replies.length !== 2) throw new Error('BullMQ add: the transaction was not run')
    const [existed, added] = replies as [unknown, unknown]
    if (existed instanceof Error) throw existed
    if (added instanceof Error) throw added
    if (existed === 1) return 'duplicate'
    // A job stored under another id (a deduplication of BullMQ's own) or an error code: ours is
    // stored nowhere, so never a 202.
    if (added !== jobId) throw new Error(`BullMQ answered ${typeof added === 'number' ? `error code ${added}` : `job id ${String(added)}`}, not ${jobId}`)
    queue.emit?.('waiting', job)
    return 'accepted'
  }

  /** The add through `queue.add`, then the job read back: the token it holds says whose add stored it. */
  private async addAndReadBack(jobId: string, data: DeliveryJobData, token: string): Promise<AppendResult> {
    const added = await this.queue.add(DELIVERY_JOB_NAME, data, { ...this.jobOptions, jobId })
    // BullMQ answers the id it holds the job under: another one means it kept an existing job
    // by a rule of its own (a deduplication) and ours is stored nowhere. Never a 202 then.
    if (added.id !== undefined && added.id !== jobId) throw new Error(`BullMQ answered job id ${added.id}, not ${jobId}`)
    return (await this.holds(jobId, token)) ? 'accepted' : 'duplicate'
  }

  /**
   * Whether the job the queue holds under `jobId` is the one stamped with `token`. The job's raw
   * JSON is searched for the token where the backend hands it out (half the cost of `getJob`,
   * which builds a Job and parses its data); the body is base64, so only the token field can hold
   * a quoted UUID. No job counts as ours: it was stored and already processed and removed (a
   * `removeOnComplete` shorter than the round trip), or the one that was there went meanwhile.
   * Nothing is lost either way.
   */
  private async holds(jobId: string, token: string): Promise<boolean> {
    const read = this.queue.backend?.getJobData
    if (read) {
      const raw = (await read.call(this.queue.backend, jobId))?.data
      if (typeof raw === 'string') return raw.includes(`"token":"${token}"`)
      if (raw === undefined || raw === null) return true
    }
    const job = await this.queue.getJob(jobId)
    const stored = (job?.data as { token?: unknown } | undefined)?.token
    return stored === undefined || stored === token
  }
}

/**
 * Refuses, at construction, a queue on Redis Cluster that BullMQ cannot serve: one whose prefix has
 * no hash tag (each BullMQ script touches several keys of the queue: CROSSSLOT at the first add),
 * and one on a node-redis `createCluster()` connection. BullMQ 6's node-redis adapter has no
 * Cluster support yet: the add works, but a Worker on such a connection waits for a `ready` event
 * the node-redis Cluster never sends, so its blocking wait for new jobs is never issued and the
 * jobs stay in `wait` (seen with 30 deliveries: 29 never ran). An ioredis `Cluster` works.
 */
function checkClusterQueue(queue: BullMQQueueLike): void {
  const { connection, prefix = 'bull' } = (queue as { opts?: { connection?: unknown; prefix?: string } }).opts ?? {}
  if (redisClientKind(connection) === 'node-redis-cluster') {
    throw new TypeError(
      "svc-webhooks: BullMQInbox: the queue's connection is a node-redis Cluster (createCluster), which BullMQ 6 does not support: " +
        "a Worker on it never wakes for new jobs, so accepted deliveries stay in 'wait'. Connect the Queue and the Worker with " +
        "ioredis: new Queue(name, { connection: new Cluster(nodes), prefix: '{bull}' }).",
    )
  }
  if (isRedisCluster(connection)) requireHashTag(prefix, 'the BullMQ queue `prefix`', '{bull}')
}

/** Options of {@link createBullMQProcessor}. */
export interface BullMQProcessorOptions extends EngineProcessorOptions {
  /**
   * The longest a handler may run: past it its `delivery.signal` is aborted and the job is
   * failed for BullMQ to retry ("handler timed out after … ms"). A worker killed meanwhile
   * leaves its store claim for this long plus a minute; a re-run of the job finds the claim and
   * is delayed (not counted as an attempt) until it is over.
   * @default 300000 (5 min)
   */
  handlerTimeoutMs?: number
}

/**
 * Creates the processor for the user's own BullMQ `Worker`: each job a {@link BullMQInbox} added
 * runs its handler through the inbox worker's processing path. The handler's success completes
 * the job; its failure is thrown, so BullMQ retries it by the job's `attempts` and `backoff` and
 * then moves it to the failed set (the dead letters, retried from there with `job.retry()`). A
 * job that is not a delivery is failed at once (`UnrecoverableError`). With `store`, a handler
 * runs once per id even when BullMQ hands a job out again (a stalled job).
 *
 * @example
 * new Worker('webhooks', createBullMQProcessor({ on: { 'message.received': save }, store: new RedisStore({ client }) }), { connection })
 */
export function createBullMQProcessor(options: BullMQProcessorOptions): (job: BullMQJobLike, token?: string, signal?: AbortSignal) => Promise<void> {
  const { handlerTimeoutMs = 5 * 60 * 1000 } = options
  positiveOption(handlerTimeoutMs, 'createBullMQProcessor handlerTimeoutMs')
  const policy = enginePolicy('BullMQ', options, { handlerTimeoutMs, claimMs: handlerTimeoutMs + 60_000, firstRetryDelayMs: 1000, maxRetryDelayMs: Infinity })

  // Three parameters: BullMQ hands a signal only to a processor that declares one.
  return async function processWebhookJob(job, token, signal) {
    let delivery: InboxDelivery
    try {
      delivery = fromJobData(job.data, 'BullMQInbox')
    } catch (error) {
      throw named('UnrecoverableError', (error as Error).message)
    }
    let settled: Settlement | undefined
    let result: InboxWorkerResult | undefined
    const attempts = job.attemptsMade + 1
    const run: ProcessJob = {
      delivery,
      attempts,
      stalled: 0,
      retriesSince: delivery.receivedAt,
      owner: appendToken(),
      // The acks only note the answer: BullMQ records it when this function returns or throws.
      acks: {
        complete: async () => ((settled = { ack: 'complete' }), true),
        retry: async (delayMs, error) => ((settled = { ack: 'retry', delayMs, error }), true),
        bury: async (error) => ((settled = { ack: 'bury', error }), true),
      },
      ...(signal && { abort: signal }),
    }
    await processDelivery(run, {
      ...policy,
      ...delaysOf(job.opts.backoff),
      report: (r) => ((result = r), policy.report(r)),
    })
    const outcome = settled as Settlement | undefined
    if (outcome === undefined || outcome.ack === 'complete') return
    if (outcome.ack === 'bury') throw named('UnrecoverableError', outcome.error)
    if (result?.outcome === 'in_flight') {
      // Another run holds the id: wait for its claim without spending one of the job's attempts.
      await job.moveToDelayed(policy.now() + outcome.delayMs, token)
      throw named('DelayedError', 'another run holds this delivery in the store')
    }
    if (attempts >= (job.opts.attempts ?? 1)) {
      policy.say('dead', `delivery ${printable(delivery.id)} failed its last of ${job.opts.attempts ?? 1} attempt(s): BullMQ moves it to the failed set (the dead letters); retry it there once the cause is fixed.`, delivery.id)
    }
    const error = result?.error
    throw error instanceof Error ? error : new Error(outcome.error)
  }
}

/** The job's backoff as processDelivery's delays, so its log lines say when BullMQ retries (a custom strategy: the defaults). */
function delaysOf(backoff: BullMQJobLike['opts']['backoff']): { firstRetryDelayMs?: number; maxRetryDelayMs?: number } {
  const spec = typeof backoff === 'number' ? { type: 'fixed', delay: backoff } : backoff
  const delay = spec?.delay
  if (typeof delay !== 'number' || !(delay > 0)) return {}
  if (spec!.type === 'fixed') return { firstRetryDelayMs: delay, maxRetryDelayMs: delay }
  return spec!.type === 'exponential' ? { firstRetryDelayMs: delay } : {}
}

/** An error BullMQ recognises by its name (`UnrecoverableError`, `DelayedError`), without importing bullmq. */
function named(name: string, message: string): Error {
  const error = new Error(message)
  error.name = name
  return error
}
