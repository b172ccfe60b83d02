/**
 * `RedisInbox` (`svc-webhooks/redis`): the durable inbox on Redis (DESIGN.md "Durable inbox").
 * Every operation is ONE Lua script, so each is atomic on the server and costs one round trip;
 * times inside the scripts come from the server's `TIME`, so workers on machines whose clocks
 * disagree still agree on which delivery is due and whose lease expired. Nothing is kept in this
 * process: whatever Redis acknowledged is all there is, and it survives a restart as far as the
 * server's persistence does (run it with `appendonly yes`, `appendfsync always`).
 *
 * Key layout under `prefix` (default `svc-webhooks:inbox:`), and why each structure:
 *
 * - `e:<primary key>`: a HASH per delivery (waiting, leased or dead): its fields, `attempts`,
 *   `lastError`, `lease`, `leaseUntil`, `state`. A hash so a take, a retry or an extend rewrites
 *   a few small fields in place and never copies the body (up to 1 MiB) back and forth. The body
 *   is stored as base64: both clients decode the replies of `EVAL` as UTF-8 text by default, and
 *   asking each for raw buffers differs (ioredis `evalBuffer`, node-redis type mappings); base64
 *   is plain ASCII, so every byte round-trips through either client at a cost of 4/3 the size.
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
 *   limit); requeue removes one by its key in O(log n) (`LREM` on a list would be O(n)).
 * - `k:<dedupe key>`: a STRING per dedupe key: `a:<append token>` while its delivery is in the
 *   inbox or dead (no expiry), `p:<lease>` once processed, with `PX retentionMs`. A string per key
 *   because Redis 7.0 has no per-field expiry in a hash; `GET` is O(1).
 * - `seq`: the counter the lease tokens are drawn from.
 *
 * Commands inside each script (one `EVAL` round trip each; k = keys of the delivery, m = entries):
 * append: TIME, GET x k, then SET x k, HSET, ZADD x 2 | take: TIME, ZRANGEBYSCORE, INCRBY, and
 * per entry HMGET, HSET, ZADD | complete: TIME, HMGET, HGET, SET PX x k, DEL, ZREM x 2, SREM |
 * retry: TIME, HMGET, HINCRBY, HSET, ZADD, SADD | bury: TIME, HMGET, HINCRBY, HSET, ZREM x 2,
 * SREM, ZADD | extend: TIME, HMGET, HSET, ZADD | dead: ZRANGE, HMGET x m | requeue: ZREM, HSET,
 * HDEL, TIME, HGET, ZADD x 2 | stats: TIME, ZCARD x 2, ZRANGE, SCARD.
 *
 * Operations are retried within `timeoutMs` (withDeadline), so each answers the same when it runs
 * twice: an append recognises its own token, a complete, retry or bury its own lease. A take that
 * lands after its caller gave up is handed back at once. Dead letters (and their keys, so a resend
 * stays a duplicate) are kept until requeued. Needs Redis 5 or later (writes after `TIME` in a
 * script), and a runtime with `Buffer`, as both clients do.
 */
import { DEFAULT_INBOX_RETENTION_MS, type AppendResult, type DeadLetter, type InboxDelivery, type InboxEntry, type InboxStats, type WebhookInbox } from './inbox.js'
import { positiveOption, withDeadline } from '../stores/deadline.js'
import { adapt, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../stores/redis-client.js'

/** Options of {@link RedisInbox}. */
export interface RedisInboxOptions {
  /**
   * A connected `ioredis` client, or a `node-redis` (v4+) client after `await client.connect()`,
   * as for `RedisStore`. The server must not evict keys (`maxmemory-policy noeviction`, the
   * default): an evicted entry is an accepted delivery lost.
   */
  client: IORedisLikeClient | NodeRedisLikeClient
  /**
   * Prepended to every key. On Redis Cluster put a hash tag in it (`'{svc-webhooks:inbox}:'`):
   * a take reaches entries it only learns about inside its script, so every key of one inbox
   * must live in one slot.
   * @default 'svc-webhooks:inbox:'
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
}

// ARGV[1] is the prefix in every script; KEYS[1] is `<prefix>due`, the key every script touches.
const PRELUDE = `local P = ARGV[1]
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function held(e, lease, now)
  local f = redis.call('HMGET', e, 'state', 'lease', 'leaseUntil')
  return f[1] == 'waiting' and f[2] == lease and tonumber(f[3]) > now
end
`

/** The fields a taken entry or a dead letter is read back with, in the order {@link toDelivery} expects. */
const FIELDS = `'keys', 'endpoint', 'id', 'timestamp', 'version', 'secretIndex', 'body', 'receivedAt', 'attempts', 'lastError'`

// ARGV: prefix, append token, keys (JSON), endpoint, id, timestamp, version, secretIndex,
// body (base64), receivedAt, then each dedupe key (the primary first).
const APPEND = `${PRELUDE}
local pk = ARGV[11]
for i = 11, #ARGV do
  local v = redis.call('GET', P .. 'k:' .. ARGV[i])
  if v then
    if i == 11 and v == 'a:' .. ARGV[2] then return 'accepted' end
    return 'duplicate'
  end
end
local now = clock()
for i = 11, #ARGV do redis.call('SET', P .. 'k:' .. ARGV[i], 'a:' .. ARGV[2]) end
redis.call('HSET', P .. 'e:' .. pk, 'keys', ARGV[3], 'endpoint', ARGV[4], 'id', ARGV[5], 'timestamp', ARGV[6],
  'version', ARGV[7], 'secretIndex', ARGV[8], 'body', ARGV[9], 'receivedAt', ARGV[10], 'attempts', 0,
  'state', 'waiting', 'lease', '', 'leaseUntil', 0)
redis.call('ZADD', KEYS[1], now, pk)
redis.call('ZADD', P .. 'recv', ARGV[10], pk)
return 'accepted'`

// ARGV: prefix, max, visibilityMs. Replies one row per entry: FIELDS, then the lease.
const TAKE = `${PRELUDE}
local now = clock()
local expiry = now + tonumber(ARGV[3])
local pks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local rows = {}
if #pks == 0 then return rows end
local last = redis.call('INCRBY', P .. 'seq', #pks)
for i, pk in ipairs(pks) do
  local e = P .. 'e:' .. pk
  local row = redis.call('HMGET', e, ${FIELDS})
  if row[1] then
    local lease = tostring(last - #pks + i)
    redis.call('HSET', e, 'lease', lease, 'leaseUntil', expiry)
    redis.call('ZADD', KEYS[1], expiry, pk)
    row[11] = lease
    rows[#rows + 1] = row
  else
    -- Its hash was deleted by hand: drop the orphan rather than fail every take.
    redis.call('ZREM', KEYS[1], pk)
    redis.call('ZREM', P .. 'recv', pk)
  end
end
return rows`

// ARGV: prefix, primary key, lease, retentionMs. A repeat by the same lease answers 1 again.
const COMPLETE = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
if not held(e, lease, clock()) then
  if redis.call('GET', P .. 'k:' .. pk) == 'p:' .. lease then return 1 end
  return 0
end
for _, key in ipairs(cjson.decode(redis.call('HGET', e, 'keys'))) do
  redis.call('SET', P .. 'k:' .. key, 'p:' .. lease, 'PX', ARGV[4])
end
redis.call('DEL', e)
redis.call('ZREM', KEYS[1], pk)
redis.call('ZREM', P .. 'recv', pk)
redis.call('SREM', P .. 'retrying', pk)
return 1`

// ARGV: prefix, primary key, lease, delayMs, error. `retriedLease` makes a repeat answer 1.
const RETRY = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then
  if redis.call('HGET', e, 'retriedLease') == lease then return 1 end
  return 0
end
redis.call('HINCRBY', e, 'attempts', 1)
redis.call('HSET', e, 'lastError', ARGV[5], 'lease', '', 'leaseUntil', 0, 'retriedLease', lease)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), pk)
redis.call('SADD', P .. 'retrying', pk)
return 1`

// ARGV: prefix, primary key, lease, error. The entry keeps its lease once dead, so a repeat answers 1.
const BURY = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then
  local f = redis.call('HMGET', e, 'state', 'lease')
  if f[1] == 'dead' and f[2] == lease then return 1 end
  return 0
end
redis.call('HINCRBY', e, 'attempts', 1)
redis.call('HSET', e, 'lastError', ARGV[4], 'state', 'dead', 'leaseUntil', 0, 'deadAt', now)
redis.call('ZREM', KEYS[1], pk)
redis.call('ZREM', P .. 'recv', pk)
redis.call('SREM', P .. 'retrying', pk)
redis.call('ZADD', P .. 'dead', now, pk)
return 1`

// ARGV: prefix, primary key, lease, visibilityMs (0: give the entry back, due now).
const EXTEND = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then return 0 end
local ms = tonumber(ARGV[4])
if ms == 0 then
  redis.call('HSET', e, 'lease', '', 'leaseUntil', 0)
  redis.call('ZADD', KEYS[1], now, pk)
  return 1
end
redis.call('HSET', e, 'leaseUntil', now + ms)
redis.call('ZADD', KEYS[1], now + ms, pk)
return 1`

// ARGV: prefix, last index (limit - 1, or -1 for all). Replies one row per dead letter: FIELDS, then deadAt.
const DEAD = `${PRELUDE}
local rows = {}
for i, pk in ipairs(redis.call('ZRANGE', P .. 'dead', 0, ARGV[2])) do
  rows[i] = redis.call('HMGET', P .. 'e:' .. pk, ${FIELDS}, 'deadAt')
end
return rows`

// ARGV: prefix, primary key.
const REQUEUE = `${PRELUDE}
local pk = ARGV[2]
local e = P .. 'e:' .. pk
if redis.call('ZREM', P .. 'dead', pk) == 0 then return 0 end
redis.call('HSET', e, 'attempts', 0, 'state', 'waiting', 'lease', '', 'leaseUntil', 0)
redis.call('HDEL', e, 'lastError', 'deadAt', 'retriedLease')
redis.call('ZADD', KEYS[1], clock(), pk)
redis.call('ZADD', P .. 'recv', redis.call('HGET', e, 'receivedAt'), pk)
return 1`

// ARGV: prefix. Replies depth, oldest age (ms, by the server clock), retrying, dead.
const STATS = `${PRELUDE}
local now = clock()
local oldest = redis.call('ZRANGE', P .. 'recv', 0, 0, 'WITHSCORES')
local age = 0
if oldest[2] then age = math.max(0, now - tonumber(oldest[2])) end
return { redis.call('ZCARD', KEYS[1]), age, redis.call('SCARD', P .. 'retrying'), redis.call('ZCARD', P .. 'dead') }`

const decoder = new TextDecoder()
const MAX_TAKE = 1000

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

/** A row of FIELDS as a delivery with its attempts and last error. */
function toDelivery(row: unknown): InboxDelivery & { attempts: number; lastError?: string } {
  if (!Array.isArray(row) || row.length < 10 || !present(row[0]) || !present(row[6])) {
    throw new Error('svc-webhooks: RedisInbox got an entry it cannot read from Redis (was a key under its prefix changed by hand?).')
  }
  const version = text(row[4])
  return {
    keys: JSON.parse(text(row[0])) as string[],
    endpoint: text(row[1]),
    id: text(row[2]),
    timestamp: Number(text(row[3])),
    signatureVersion: version === 'v1' ? 'v1' : 'v2',
    secretIndex: Number(text(row[5])),
    // A copy, not Buffer.from's view: small Buffers share a pool with unrelated bytes.
    rawBody: new Uint8Array(Buffer.from(text(row[6]), 'base64')),
    receivedAt: Number(text(row[7])),
    attempts: Number(text(row[8])),
    ...(present(row[9]) ? { lastError: text(row[9]) } : {}),
  }
}

function rows(reply: unknown): unknown[] {
  return Array.isArray(reply) ? reply : []
}

/** Milliseconds as a whole positive number for the scripts. */
function ms(value: number, what: string): string {
  positiveOption(value, `RedisInbox ${what}`)
  return String(Math.max(1, Math.ceil(value)))
}

/**
 * The durable inbox on Redis: one Lua script per operation, timed by the server clock, safe for
 * any number of receivers and workers sharing one Redis. Run the server with `appendonly yes` and
 * `appendfsync always` (with `everysec`, a crash may lose up to a second of deliveries the
 * sender was already told 202 about) and `maxmemory-policy noeviction`.
 *
 * @example
 * import Redis from 'ioredis'
 * import { createInboxWorker } from 'svc-webhooks'
 * import { RedisInbox } from 'svc-webhooks/redis'
 * const inbox = new RedisInbox({ client: new Redis(process.env.REDIS_URL!) })
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 */
export class RedisInbox implements WebhookInbox {
  readonly prefix: string
  readonly retentionMs: number
  readonly timeoutMs: number
  private readonly run: Run
  private readonly due: string

  constructor({ client, prefix = 'svc-webhooks:inbox:', retentionMs = DEFAULT_INBOX_RETENTION_MS, timeoutMs = 2000 }: RedisInboxOptions) {
    this.run = adapt(client, 'RedisInbox')
    if (typeof prefix !== 'string') throw new TypeError('svc-webhooks: RedisInbox `prefix` must be a string.')
    positiveOption(retentionMs, 'RedisInbox `retentionMs`')
    positiveOption(timeoutMs, 'RedisInbox `timeoutMs`')
    this.prefix = prefix
    this.retentionMs = retentionMs
    this.timeoutMs = timeoutMs
    this.due = `${prefix}due`
  }

  private call(what: string, script: string, args: string[], onLate?: (late: unknown) => void): Promise<unknown> {
    return withDeadline(`RedisInbox.${what}`, this.timeoutMs, () => this.run(script, this.due, [this.prefix, ...args]), onLate)
  }

  async append(delivery: InboxDelivery): Promise<AppendResult> {
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
    const args = [token, JSON.stringify(keys), endpoint, id, String(timestamp), signatureVersion, String(secretIndex), body, String(receivedAt), ...keys]
    const result = text(await this.call('append', APPEND, args))
    if (result === 'accepted' || result === 'duplicate') return result
    throw new Error('svc-webhooks: RedisInbox.append got an unexpected reply from Redis.')
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    // At most MAX_TAKE per reply, so one reply stays bounded (bodies are up to 1 MiB each).
    const count = Math.min(Math.floor(max), MAX_TAKE)
    if (!(count >= 1)) return []
    const reply = await this.call('take', TAKE, [String(count), ms(visibilityMs, 'visibilityMs')], (late) => {
      // Taken after we gave up waiting: hand them back now rather than when the lease expires.
      for (const entry of this.entries(late)) this.call('release', EXTEND, [entry.keys[0]!, entry.lease, '0']).catch(() => undefined)
    })
    return this.entries(reply)
  }

  private entries(reply: unknown): InboxEntry[] {
    return rows(reply).map((row) => {
      const delivery = toDelivery(row)
      return { ...delivery, takes: delivery.attempts + 1, retriesSince: delivery.receivedAt, lease: text((row as unknown[])[10]) }
    })
  }

  async complete(entry: InboxEntry): Promise<boolean> {
    const done = await this.call('complete', COMPLETE, [entry.keys[0]!, entry.lease, String(Math.ceil(this.retentionMs))])
    return Number(done) === 1
  }

  async retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean> {
    if (!Number.isFinite(delayMs)) throw new TypeError('svc-webhooks: RedisInbox.retry needs a finite `delayMs`.')
    const delay = String(Math.max(0, Math.ceil(delayMs)))
    const done = await this.call('retry', RETRY, [entry.keys[0]!, entry.lease, delay, String(error)])
    return Number(done) === 1
  }

  async bury(entry: InboxEntry, error: string): Promise<boolean> {
    const done = await this.call('bury', BURY, [entry.keys[0]!, entry.lease, String(error)])
    return Number(done) === 1
  }

  async extend(entry: InboxEntry, visibilityMs: number): Promise<boolean> {
    const done = await this.call('extend', EXTEND, [entry.keys[0]!, entry.lease, ms(visibilityMs, 'visibilityMs')])
    return Number(done) === 1
  }

  async dead(limit = 100): Promise<DeadLetter[]> {
    const count = Math.floor(limit)
    if (!(count >= 1)) return []
    // ZRANGE's stop index: -1 (all of them) for an unbounded limit.
    const reply = await this.call('dead', DEAD, [String(Number.isFinite(count) ? count - 1 : -1)])
    return rows(reply).map((row) => {
      const { attempts, lastError, ...delivery } = toDelivery(row)
      return { ...delivery, attempts, takes: attempts, lastError: lastError ?? '', deadAt: Number(text((row as unknown[])[10])) }
    })
  }

  async requeue(key: string): Promise<boolean> {
    return Number(await this.call('requeue', REQUEUE, [key])) === 1
  }

  async purge(_key: string): Promise<boolean> {
    throw new Error('svc-webhooks: RedisInbox.purge is not implemented yet.')
  }

  async stats(): Promise<InboxStats> {
    const [depth, oldestAgeMs, retrying, dead] = rows(await this.call('stats', STATS, [])).map((value) => Number(value))
    return { depth: depth ?? 0, oldestAgeMs: oldestAgeMs ?? 0, retrying: retrying ?? 0, dead: dead ?? 0 }
  }
}
