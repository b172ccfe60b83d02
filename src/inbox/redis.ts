/**
 * `RedisInbox` (`svc-webhooks/redis`): the durable inbox on Redis (DESIGN.md "Durable inbox").
 * Every operation is ONE Lua script (src/inbox/redis-scripts.ts), so each is atomic on the server
 * and costs one round trip; times inside the scripts come from the server's `TIME`, so workers on
 * machines whose clocks disagree still agree on which delivery is due and whose lease expired.
 * Nothing is kept in this process: whatever Redis acknowledged is all there is, and it survives a
 * restart as far as the server's persistence does (run it with `appendonly yes`, `appendfsync
 * always`; `durabilityWarnings()` says when it does not).
 *
 * Key layout under `prefix` (default `{svc-webhooks:inbox}:`: its hash tag puts every key of the
 * inbox in one Redis Cluster slot, as one script touches several of them), and why each structure:
 *
 * - `e:<primary key>`: a HASH per delivery (waiting, leased or dead): its fields, `attempts`,
 *   `takes`, `retriesSince`, `lastError`, `lease`, `leaseUntil`, `state`. A hash so a take, a
 *   retry or an extend rewrites a few small fields in place and never copies the body (up to
 *   1 MiB) back and forth. The body is stored as base64: both clients decode the replies of
 *   `EVAL` as UTF-8 text by default, and asking each for raw buffers differs (ioredis
 *   `evalBuffer`, node-redis type mappings); base64 is plain ASCII, so every byte round-trips
 *   through either client at a cost of 4/3 the size.
 * - `due`: a ZSET of the deliveries in the inbox (not dead), scored by the time each is next
 *   takeable: its due time while waiting, its lease expiry while leased. One score covers
 *   "new", "retry in 30 s" and "a crashed worker's lease ran out": take is
 *   `ZRANGEBYSCORE due -inf now LIMIT 0 max`, O(log n + max), with no sweeper. A LIST with
 *   `LMOVE` to a processing list cannot express a delay or a lease expiry without a scanner.
 *   Its `ZCARD` is the depth, O(1).
 * - `recv`: a ZSET of the same deliveries scored by `receivedAt`: the oldest one is `ZRANGE recv
 *   0 0`, O(log n), where `due` is ordered by something else.
 * - `retrying`: a SET of the deliveries whose handler failed at least once: `SCARD` is O(1), and
 *   `SADD`/`SREM` are idempotent, so the count cannot drift the way a counter can.
 * - `dead`: a ZSET of dead letters scored by burial time: oldest first with `ZRANGE`, O(log n +
 *   limit); requeue and purge remove one by its key in O(log n) (`LREM` on a list would be O(n)).
 * - `k:<dedupe key>`: a STRING per dedupe key: `a:<append token>` while its delivery is in the
 *   inbox or dead (no expiry), `p:<lease>` once processed (`p:purged` once purged), with `PX
 *   retentionMs`. A string per key because Redis 7.0 has no per-field expiry in a hash; `GET` is O(1).
 *
 * Lease tokens are `<random>.<n>`, the random part drawn by this process for each take: no server
 * counter, which a restart from an older snapshot (RDB, or an AOF missing its last `everysec`
 * second) would roll back and hand out again to a second holder.
 *
 * Commands inside each script (one `EVAL` round trip each; k = keys of the delivery, m = entries):
 * append: TIME, GET x k, then SET x k, HSET, ZADD x 2 | take: TIME, ZRANGEBYSCORE, and per entry
 * EXISTS, HMGET, HINCRBY, HSET, ZADD | complete: TIME, HMGET, HGET, SET PX x k, DEL, ZREM x 2, SREM
 * | retry: TIME, HMGET, HINCRBY, HSET, ZADD, SADD | bury: TIME, HMGET, HINCRBY, HSET, ZREM x 2,
 * SREM, ZADD | extend: TIME, HMGET, HSET, ZADD | dead: ZRANGE, HMGET x m | requeue: ZREM, TIME,
 * HSET, HDEL, HGET, ZADD x 2 | purge: ZREM, HGET, SET PX x k, DEL | stats: TIME, ZCARD x 2,
 * ZRANGE, SCARD.
 *
 * Operations are retried within `timeoutMs`, so each answers the same when it runs twice: an
 * append recognises its own token, a complete, retry or bury its own lease (idempotent acks). An
 * error reply that repeating will not fix (OOM under `noeviction`, WRONGTYPE, a script error) is
 * not retried: it rejects at once with an `InboxError` of kind `refused`; a server that does not
 * answer in time rejects with kind `unavailable`. A take that lands after its caller gave up is
 * handed back at once, uncounted. An entry that cannot be read (a hash changed by hand) is moved
 * to the dead letters with the reason instead of failing every take. Dead letters (and their keys,
 * so a resend stays a duplicate) are kept until requeued or purged. Needs Redis 5 or later (writes
 * after `TIME` in a script), and a runtime with `Buffer`, as both clients do.
 */
import { InboxError, type AppendResult, type DeadLetter, type InboxDelivery, type InboxEntry, type InboxStats, type WebhookInbox } from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { adapt, isRedisRefusal, replicasOption, replicationWarnings, REPLICATION_INFO, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../clients/redis.js'
import { budget, inboxDeadline, unchecked } from '../clients/deadline.js'
import { isRedisCluster, requireHashTag } from '../clients/redis-keys.js'
import { DEFAULT_PREFIX, LEGACY_PREFIX, legacyWarnings } from './redis-move.js'
import { APPEND, BURY, COMPLETE, DEAD, EXTEND, EXTRA, PURGE, RELEASE, REQUEUE, RETRY, SETTINGS, STATS, TAKE } from './redis-scripts.js'
import { RedisOrder } from './redis-order.js'
import { OrderedEngine } from './ordered-engine.js'
import { filingToStore, type InboxOrderingOption } from './ordering.js'
import { flowStats } from './flow-stats.js'
import type { OrderedEntry } from '../contracts/ordering.js'

/** Options of {@link RedisInbox}. */
export interface RedisInboxOptions extends InboxOrderingOption {
  /**
   * A connected `ioredis` client, or a `node-redis` (v4+) client after `await client.connect()`,
   * as for `RedisStore`. The server must not evict keys (`maxmemory-policy noeviction`, the
   * default): an evicted entry is an accepted delivery lost.
   */
  client: IORedisLikeClient | NodeRedisLikeClient
  /**
   * Prepended to every key. Its hash tag (`{...}`) puts every key of one inbox in one Redis
   * Cluster slot: a take reaches entries it only learns about inside its script. With a Cluster
   * client (ioredis `Cluster`, node-redis `createCluster`) a prefix without a tag is refused at
   * construction; a single server takes any prefix.
   * @default '{svc-webhooks:inbox}:'
   */
  prefix?: string
  /**
   * How long the keys of a processed delivery are remembered, so a resend is answered 200 duplicate.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * Longest wait for one operation, retries included. Past it the operation rejects: an append
   * is answered 503 (the sender retries), a worker waits and takes again.
   * @default 2000
   */
  timeoutMs?: number
  /**
   * Replicas that must hold a write before it counts (`WAIT`): an append before its 202, the
   * record behind a 200 `duplicate`, a take before the worker starts the handler, an ack before
   * the worker moves on. A write that does not reach them in time is tried again until the
   * deadline (its client asked to find the primary through Sentinel again meanwhile). Use 1 with
   * a primary, two replicas, three sentinels and `min-replicas-to-write 1` (docs/topologies.md).
   * Needs a client of one primary (plain or Sentinel), not a Cluster client.
   * @default 0
   */
  replicas?: number
}

const decoder = new TextDecoder()
const MAX_TAKE = 1000
/** What a dead letter that cannot be read says, in place of its last error. */
const UNREADABLE = 'svc-webhooks: RedisInbox found an entry it cannot read under its prefix (was a key changed by hand?): moved to the dead letters; purge(key) deletes it.'

/** A reply value as text (node-redis may be configured to hand out buffers). */
function text(value: unknown): string {
  return value instanceof Uint8Array ? decoder.decode(value) : String(value)
}

/**
 * Whether a reply value holds something. A missing hash field is Lua's `false` in the script,
 * which both clients hand out as null; `false` is refused too, should a client map it to a boolean.
 */
function present(value: unknown): boolean {
  return value !== null && value !== undefined && value !== false
}

/** A whole number read from a reply value, or `fallback` when the field is missing. */
function count(value: unknown, fallback: number): number {
  return present(value) ? Number(text(value)) : fallback
}

/** A row of the scripts' fields, read. */
interface Read {
  delivery: InboxDelivery
  attempts: number
  takes: number
  retriesSince: number
  lastError?: string
}

/**
 * A reply row (the scripts' FIELDS) as a delivery with its counters, or undefined when the entry
 * cannot be read (a hash written or changed by hand). Entries written before `takes` and
 * `retriesSince` existed read as 0 and `receivedAt`.
 */
function readRow(row: unknown): Read | undefined {
  if (!Array.isArray(row) || row.length < EXTRA || !present(row[0]) || !present(row[6])) return undefined
  try {
    const keys: unknown = JSON.parse(text(row[0]))
    if (!Array.isArray(keys) || keys.length === 0 || !keys.every((key) => typeof key === 'string')) return undefined
    const version = text(row[4])
    const delivery: InboxDelivery = {
      keys,
      endpoint: text(row[1]),
      id: text(row[2]),
      timestamp: Number(text(row[3])),
      signatureVersion: version === 'v1' ? 'v1' : 'v2',
      secretIndex: Number(text(row[5])),
      // A copy, not Buffer.from's view: small Buffers share a pool with unrelated bytes.
      rawBody: new Uint8Array(Buffer.from(text(row[6]), 'base64')),
      receivedAt: Number(text(row[7])),
    }
    if (present(row[12]) && text(row[12]) !== '') delivery.traceparent = text(row[12])
    const read: Read = {
      delivery,
      attempts: count(row[8], 0),
      takes: count(row[10], 0),
      retriesSince: count(row[11], delivery.receivedAt),
      ...(present(row[9]) ? { lastError: text(row[9]) } : {}),
    }
    const numbers = [delivery.timestamp, delivery.secretIndex, delivery.receivedAt, read.attempts, read.takes, read.retriesSince]
    return numbers.every(Number.isFinite) ? read : undefined
  } catch {
    return undefined
  }
}

/**
 * A read row as a taken entry: the counters and the lease are set on the row's own fresh delivery
 * object rather than copied into a new one, as this runs for every delivery taken or placed.
 */
function takenEntry(read: Read, lease: string): InboxEntry {
  const entry = read.delivery as InboxEntry
  entry.attempts = read.attempts
  entry.takes = read.takes
  entry.retriesSince = read.retriesSince
  entry.lease = lease
  if (read.lastError !== undefined) entry.lastError = read.lastError
  return entry
}

function rows(reply: unknown): unknown[] {
  return Array.isArray(reply) ? reply : []
}

/** Milliseconds as a whole positive number for the scripts. */
function ms(value: number, what: string): string {
  positiveOption(value, `RedisInbox ${what}`)
  return String(Math.max(1, Math.ceil(value)))
}

/** The value of `field` in an INFO section (`field:value` lines). */
function infoField(info: unknown, field: string): string | undefined {
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(text(info))?.[1]
}

/**
 * The durable inbox on Redis: one Lua script per operation, timed by the server clock, safe for
 * any number of receivers and workers sharing one Redis. Run the server with `appendonly yes` and
 * `appendfsync always` (with `everysec`, a crash may lose up to a second of deliveries the
 * sender was already told 202 about) and `maxmemory-policy noeviction`. Every method rejects
 * with an `InboxError` (`unavailable` or `refused`) when Redis fails it, a TypeError when called
 * with arguments that are not what it takes.
 *
 * @example
 * import Redis from 'ioredis'
 * import { createInboxWorker } from 'svc-webhooks'
 * import { RedisInbox } from 'svc-webhooks/redis'
 * const inbox = new RedisInbox({ client: new Redis(process.env.REDIS_URL!) })
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 */
export class RedisInbox extends OrderedEngine implements WebhookInbox {
  readonly prefix: string
  readonly retentionMs: number
  readonly timeoutMs: number
  private readonly run: Run
  private readonly read: Run
  private readonly due: string
  /**
   * Ordering, flow control and the workers' mode (src/inbox/redis-order.ts), over this inbox's
   * script runner; the calls themselves are {@link OrderedEngine}'s.
   */
  protected readonly order = new RedisOrder(
    (what, script, args, onLate) => this.call(what, script, args, onLate),
    (row) => {
      const read = readRow(row)
      return read === undefined ? undefined : takenEntry(read, this.leaseOf(row)[0])
    },
    () => this.retentionMs,
  )

  private readonly client: unknown
  readonly replicas: number

  constructor({ client, prefix = DEFAULT_PREFIX, retentionMs = DEFAULT_RETENTION_MS, timeoutMs = 2000, replicas, ordering }: RedisInboxOptions) {
    super(ordering, 'RedisInbox')
    if (typeof prefix !== 'string') throw new TypeError('svc-webhooks: RedisInbox `prefix` must be a string.')
    this.replicas = replicasOption(replicas, client, 'RedisInbox')
    this.run = adapt(client, 'RedisInbox', { replicas: this.replicas, fenceKey: `${prefix}fence` })
    // Reads that promise nothing (stats, dead letters, settings) do not wait for replicas.
    this.read = this.replicas === 0 ? this.run : adapt(client, 'RedisInbox')
    // On a Cluster every key of one script must share a slot: refused here, not at the first delivery.
    if (isRedisCluster(client)) requireHashTag(prefix, 'RedisInbox `prefix`')
    this.client = client
    positiveOption(retentionMs, 'RedisInbox `retentionMs`')
    positiveOption(timeoutMs, 'RedisInbox `timeoutMs`')
    this.prefix = prefix
    this.retentionMs = retentionMs
    this.timeoutMs = timeoutMs
    this.due = `${prefix}due`
  }

  /** Runs `script` within the deadline; `args` (after the prefix) may be rebuilt per attempt. */
  private call(what: string, script: string, args: string[] | (() => string[]), onLate?: (late: unknown) => void, deadline?: number, run = this.run): Promise<unknown> {
    const attempt = () => run(script, this.due, [this.prefix, ...(typeof args === 'function' ? args() : args)])
    return inboxDeadline(`RedisInbox.${what}`, budget(this.timeoutMs, deadline), attempt, { refused: isRedisRefusal, ...(onLate ? { onLate } : {}) })
  }

  private async acked(what: string, script: string, args: string[]): Promise<boolean> {
    return Number(await this.call(what, script, args)) === 1
  }

  async append(delivery: InboxDelivery, deadline?: number): Promise<AppendResult> {
    const { keys, endpoint, id, timestamp, signatureVersion, secretIndex, rawBody, receivedAt } = delivery
    if (!Array.isArray(keys) || keys.length === 0) throw new TypeError('svc-webhooks: RedisInbox.append needs at least one dedupe key.')
    // Checked here because a script stopped by a bad number keeps the writes it already made
    // (Redis does not roll a script back): its keys would be marked accepted with no entry.
    if (![timestamp, secretIndex, receivedAt].every(Number.isFinite) || !(rawBody instanceof Uint8Array)) {
      throw new TypeError('svc-webhooks: RedisInbox.append needs a delivery with numeric timestamp, secretIndex and receivedAt, and rawBody bytes.')
    }
    // The token lets a repeated attempt (a retry after a dropped connection) recognise its own append.
    const token = crypto.randomUUID()
    const body = Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength).toString('base64')
    const filed = filingToStore(this.ordering, delivery)
    const args = [token, JSON.stringify(keys), endpoint, id, String(timestamp), signatureVersion, String(secretIndex), body, String(receivedAt), delivery.traceparent ?? '', filed?.key ?? '', filed?.order ?? '', ...keys]
    const result = text(await this.call('append', APPEND, args, undefined, deadline))
    if (result === 'accepted' || result === 'duplicate') return result
    throw new InboxError('refused', 'RedisInbox.append', 'svc-webhooks: RedisInbox.append got an unexpected reply from Redis.')
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    // At most MAX_TAKE per reply, so one reply stays bounded (bodies are up to 1 MiB each).
    const wanted = Math.min(Math.floor(max), MAX_TAKE)
    if (!(wanted >= 1)) return []
    // A fresh lease token for each attempt: see the header for why not a server counter.
    const visibility = ms(visibilityMs, 'visibilityMs')
    const args = () => [String(wanted), visibility, crypto.randomUUID()]
    const reply = await this.call('take', TAKE, args, (late) => {
      // Taken after we gave up waiting: hand them back now rather than when the lease expires.
      for (const row of rows(late)) {
        const [lease, pk] = this.leaseOf(row)
        if (readRow(row) === undefined) this.quarantine(pk, lease)
        else this.call('release', RELEASE, [pk, lease]).catch(() => undefined)
      }
    })
    const entries: InboxEntry[] = []
    for (const row of rows(reply)) {
      const read = readRow(row)
      const [lease, pk] = this.leaseOf(row)
      if (read === undefined) {
        // One unreadable entry must not fail the take of every other one, take after take.
        this.quarantine(pk, lease)
        continue
      }
      entries.push(takenEntry(read, lease))
    }
    return entries
  }

  /** The lease and the primary key a take appended to a row. */
  private leaseOf(row: unknown): [lease: string, pk: string] {
    const fields = Array.isArray(row) ? row : []
    return [text(fields[EXTRA]), text(fields[EXTRA + 1])]
  }

  /** Moves an entry nobody can read to the dead letters with the reason, in the background. */
  private quarantine(pk: string, lease: string): void {
    this.call('bury', BURY, [pk, lease, UNREADABLE]).catch(() => undefined)
  }

  async complete(entry: InboxEntry): Promise<boolean> {
    return this.acked('complete', COMPLETE, [entry.keys[0]!, entry.lease, String(Math.ceil(this.retentionMs))])
  }

  /**
   * Completes a head of an ordered worker and leases its key's next head to it in the same round
   * trip, when a take would lease it now (`OrderingEngine.completeNext`).
   */
  completeNext(entry: OrderedEntry, visibilityMs: number, chain: boolean): Promise<{ done: boolean; next?: OrderedEntry }> {
    return this.order.completeWithNext(entry, visibilityMs, chain, this.retentionMs)
  }

  async retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean> {
    if (!Number.isFinite(delayMs)) throw new TypeError('svc-webhooks: RedisInbox.retry needs a finite `delayMs`.')
    return this.acked('retry', RETRY, [entry.keys[0]!, entry.lease, String(Math.max(0, Math.ceil(delayMs))), String(error)])
  }

  async bury(entry: InboxEntry, error: string): Promise<boolean> {
    return this.acked('bury', BURY, [entry.keys[0]!, entry.lease, String(error)])
  }

  async extend(entry: InboxEntry, visibilityMs: number): Promise<boolean> {
    return this.acked('extend', EXTEND, [entry.keys[0]!, entry.lease, ms(visibilityMs, 'visibilityMs')])
  }

  async dead(limit = 100): Promise<DeadLetter[]> {
    const wanted = Math.floor(limit)
    if (!(wanted >= 1)) return []
    // ZRANGE's stop index: -1 (all of them) for an unbounded limit.
    const reply = await this.call('dead', DEAD, [String(Number.isFinite(wanted) ? wanted - 1 : -1)], undefined, undefined, this.read)
    return rows(reply).map((row) => {
      const fields = row as unknown[]
      const deadAt = count(fields[EXTRA], 0)
      const read = readRow(row)
      if (read !== undefined) return { ...read.delivery, attempts: read.attempts, takes: read.takes, lastError: read.lastError ?? '', deadAt }
      // Listed all the same, under its primary key, so it can be seen and purged.
      const pk = text(fields[EXTRA + 1])
      const letter: DeadLetter = { keys: [pk], endpoint: '', id: '', timestamp: 0, signatureVersion: 'v2', secretIndex: 0, rawBody: new Uint8Array(0), receivedAt: 0, attempts: 0, takes: 0, lastError: UNREADABLE, deadAt }
      return letter
    })
  }

  async requeue(key: string): Promise<boolean> {
    return this.acked('requeue', REQUEUE, [key])
  }

  async purge(key: string): Promise<boolean> {
    return this.acked('purge', PURGE, [key, String(Math.ceil(this.retentionMs))])
  }

  /**
   * What in the server's configuration breaks the inbox's durability: `appendonly` off (a crash
   * loses what was accepted since the last snapshot) or a `maxmemory-policy` that evicts. Read
   * with INFO from inside a script (CONFIG is not allowed there); a server that refuses INFO (an
   * ACL) or does not answer gets one line saying the settings could not be checked.
   *
   * @example
   * for (const line of await inbox.durabilityWarnings()) console.warn(line)
   */
  async durabilityWarnings(): Promise<string[]> {
    let persistence: unknown
    let memory: unknown
    try {
      ;[persistence, memory] = rows(await this.call('durabilityWarnings', SETTINGS, [], undefined, undefined, this.read))
    } catch (error) {
      return [`svc-webhooks: RedisInbox could not check the server's persistence and eviction settings (${unchecked(error)}); make sure it runs with appendonly yes and maxmemory-policy noeviction.`]
    }
    const warnings: string[] = []
    // Deliveries accepted before the default prefix carried a hash tag wait under the old one.
    if (this.prefix === DEFAULT_PREFIX && !isRedisCluster(this.client)) warnings.push(...(await legacyWarnings(this.run, LEGACY_PREFIX, this.prefix)))
    if (infoField(persistence, 'aof_enabled') !== '1') {
      warnings.push('svc-webhooks: RedisInbox: the server runs without appendonly: a crash or restart loses every delivery accepted since its last snapshot, after the sender was told 202. Set appendonly yes and appendfsync always.')
    }
    const policy = infoField(memory, 'maxmemory_policy')
    if (policy !== undefined && policy !== 'noeviction') {
      warnings.push(`svc-webhooks: RedisInbox: the server's maxmemory-policy is ${policy}: under memory pressure it deletes keys, and an evicted entry is an accepted delivery lost. Set maxmemory-policy noeviction.`)
    }
    try {
      warnings.push(...replicationWarnings(await this.call('durabilityWarnings', REPLICATION_INFO, [], undefined, undefined, this.read), this.replicas, 'RedisInbox'))
    } catch (error) {
      warnings.push(`svc-webhooks: RedisInbox could not check the server's replication settings (${unchecked(error)}).`)
    }
    return warnings
  }

  async stats(): Promise<InboxStats> {
    const reply = rows(await this.call('stats', STATS, [], undefined, undefined, this.read))
    const [depth, oldestAgeMs, retrying, dead] = reply.slice(0, 4).map((value) => Number(value))
    const [paused, by, perSecond] = rows(reply[4]).map((value) => (present(value) ? text(value) : ''))
    const flow = { pause: { paused: paused === '1', ...(by ? { by } : {}) }, ...(perSecond ? { perSecond: Number(perSecond) } : {}) }
    return { depth: depth ?? 0, oldestAgeMs: oldestAgeMs ?? 0, retrying: retrying ?? 0, dead: dead ?? 0, ...flowStats(flow) }
  }
}
