/**
 * `RedisHistory` (`svc-webhooks/redis`): the history on Redis, shared by every receiver and worker
 * process. Records are written in batches, one `EVAL` per batch (redis-scripts.ts) after the
 * answer, never in the request: the claim and the append run on the store's and the inbox's own
 * keys and clients (maybe another server), and a history write inside them would put its outage
 * on the answer's path. The same script trims the expired and the oldest past `maxEntries`.
 */
import { adapt, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../clients/redis.js'
import { withDeadline } from '../clients/deadline.js'
import { positiveOption } from '../option-checks.js'
import { BatchedHistory } from './batcher.js'
import { memberOf, ofMember, taggedPrefix } from './keys.js'
import { FLAG, GET, LIST, REFUSALS, SIZE, WRITE } from './redis-scripts.js'
import { decodeCursor, encodeCursor, pageOf } from './text.js'
import {
  REFUSAL_RETENTION_MS,
  type HistoryEntry,
  type HistoryOutcome,
  type HistoryOptions,
  type HistoryPage,
  type HistoryQuery,
  type HistoryRecord,
  type RefusalCount,
} from './types.js'

/** Options of {@link RedisHistory}. */
export interface RedisHistoryOptions extends HistoryOptions {
  /** A connected `ioredis` client (or Cluster), or a `node-redis` client after `connect()`. */
  client: IORedisLikeClient | NodeRedisLikeClient
  /**
   * Prepended to every key; given a hash tag (`{...}`) when it has none, so a Cluster keeps all of them in one slot.
   * @default '{svc-webhooks:history}:'
   */
  prefix?: string
  /**
   * Longest wait for a read (`list`, `get`) or a batch write.
   * @default 2000
   */
  timeoutMs?: number
}

/** Members looked at by one `list` call at most: a page that filters out most entries ends early with a cursor. */
const SCAN_CAP = 5000

const text = (value: unknown): string | undefined =>
  value === null || value === undefined || value === false ? undefined : value instanceof Uint8Array ? new TextDecoder().decode(value) : String(value)

/**
 * An entry as stored (redis-scripts.ts): a HistoryEntry in short names, as the bytes of every
 * record cost the receiver on the socket; the id and the endpoint are in its member, updatedAt
 * only once it differs from receivedAt, replays only once there is one.
 */
interface Stored {
  /** receivedAt, updatedAt, outcome, attempts, deliveries, replays */
  r: number
  u?: number
  o: HistoryOutcome
  a: number
  d: number
  p?: number
  /** eventType, status, code, processedAt */
  t?: string
  s?: number
  c?: string
  pa?: number
  /** errorName, errorMessage */
  en?: string
  em?: string
  /** hasBody, bodyRedacted, replayedAt */
  h?: true
  br?: true
  ra?: number
}

/**
 * The entry `r` makes alone, as stored: mergeRecord(undefined, r) (merge.ts) without the body.
 * Written out rather than an object given to JSON.stringify: about a third less time per record.
 */
function stored(r: HistoryRecord): string {
  let json = `{"r":${r.at},"o":${JSON.stringify(r.outcome)},"a":${(r.attempts ?? 0) + (r.addAttempt ? 1 : 0)},"d":${r.delivered ? 1 : 0}`
  if (r.eventType !== undefined) json += `,"t":${JSON.stringify(r.eventType)}`
  if (r.status !== undefined) json += `,"s":${r.status}`
  if (r.code !== undefined) json += `,"c":${JSON.stringify(r.code)}`
  if (r.processed) json += `,"pa":${r.at}`
  if (r.error) json += `,"en":${JSON.stringify(r.error.name)},"em":${JSON.stringify(r.error.message)}`
  if (r.body !== undefined) json += r.bodyRedacted ? ',"h":true,"br":true' : ',"h":true'
  if (r.replay) json += `,"p":1,"ra":${r.at}`
  return `${json}}`
}

/** An entry as read: its stored JSON and member, and the body when one is kept. */
function toEntry(member: string, json: string, body?: string): HistoryEntry {
  const s = JSON.parse(json) as Stored
  const { endpoint, id } = ofMember(member)
  const e: HistoryEntry = { id, endpoint, receivedAt: s.r, updatedAt: s.u ?? s.r, outcome: s.o, attempts: s.a, deliveries: s.d, replays: s.p ?? 0, hasBody: s.h === true }
  if (s.t !== undefined) e.eventType = s.t
  if (s.s !== undefined) e.status = s.s
  if (s.c !== undefined) e.code = s.c
  if (s.pa !== undefined) e.processedAt = s.pa
  if (s.en !== undefined) {
    e.errorName = s.en
    e.errorMessage = s.em ?? ''
  }
  if (s.ra !== undefined) e.replayedAt = s.ra
  if (s.h === true && body !== undefined) e.body = body
  if (s.br === true) e.bodyRedacted = true
  return e
}

/**
 * The write script's arguments for a batch (redis-scripts.ts), in its order: the flags, the
 * entries as HSET takes them, their receivedAt, the bodies and the endpoints. Each member is sent
 * once: every argument costs the receiver more than the script's loop costs Redis. An endpoint
 * written is scored by its latest record, or `now` when later: never before an entry of it was
 * received.
 */
function batchArgs(records: HistoryRecord[], now: number, fixed: string[]): string[] {
  const entries: string[] = []
  const scores: string[] = []
  const bodies: string[] = []
  const heads = new Map<string, { head: string; last: number }>()
  let flags = ''
  for (const r of records) {
    let seen = heads.get(r.endpoint)
    if (seen === undefined) heads.set(r.endpoint, (seen = { head: memberOf(r.endpoint, ''), last: now }))
    if (r.at > seen.last) seen.last = r.at
    const member = seen.head + r.id
    entries.push(member, stored(r))
    scores.push(String(r.at))
    if (r.body !== undefined) bodies.push(member, r.body)
    flags += String.fromCharCode(64 + (r.soft ? FLAG.soft : 0) + (r.attempts !== undefined ? FLAG.setAttempts : 0) + (r.addAttempt ? FLAG.addAttempt : 0) + (r.error === null ? FLAG.clearError : 0))
  }
  const endpoints: string[] = []
  for (const { head, last } of heads.values()) endpoints.push(String(last), head)
  fixed.push(String(records.length), String(bodies.length / 2), String(heads.size), flags)
  return fixed.concat(entries, scores, bodies, endpoints)
}

/**
 * History on Redis: bounded (`maxEntries`, default 1,000,000), each entry kept `retentionMs`
 * (default 7 days) from its arrival, trimmed by the writes themselves.
 *
 * @example
 * import Redis from 'ioredis'
 * import { RedisHistory } from 'svc-webhooks/redis'
 * const history = new RedisHistory({ client: new Redis(process.env.REDIS_URL!), keepBodies: true })
 * app.post('/webhooks/svc', webhooks({ secret, on, history }))
 */
export class RedisHistory extends BatchedHistory {
  readonly prefix: string
  private readonly run: Run
  private readonly index: string

  constructor(options: RedisHistoryOptions) {
    const { client, prefix = '{svc-webhooks:history}:', timeoutMs = 2000 } = options
    const run = adapt(client, 'RedisHistory')
    if (typeof prefix !== 'string') throw new TypeError('svc-webhooks: RedisHistory `prefix` must be a string.')
    positiveOption(timeoutMs, 'RedisHistory `timeoutMs`')
    super('RedisHistory', options, timeoutMs)
    this.run = run
    this.prefix = taggedPrefix(prefix)
    this.index = `${this.prefix}i`
  }

  private call(name: string, script: string, args: string[]): Promise<unknown> {
    return withDeadline(`RedisHistory.${name}`, this.timeoutMs, () => this.run(script, this.index, [this.prefix, ...args]))
  }

  protected async write(records: HistoryRecord[], refusals: RefusalCount[]): Promise<void> {
    const windows = refusals.map((r) => ({ w: r.windowStart, code: r.code, n: r.count, ids: r.claimedIds }))
    const now = this.now()
    const fixed = [
      String(now),
      String(Math.ceil(this.retentionMs)),
      String(this.maxEntries),
      String(REFUSAL_RETENTION_MS),
      // An empty Lua table encodes as {}: the windows are sent as a JSON array the script decodes.
      JSON.stringify(windows),
    ]
    await this.call('write', WRITE, batchArgs(records, now, fixed))
  }

  /** The oldest receivedAt still within the retention: older entries wait for the next write's trim, unread. */
  private oldest(): number {
    return this.now() - this.retentionMs
  }

  async list(query: HistoryQuery = {}): Promise<HistoryPage> {
    const { limit, since, until } = pageOf(query)
    const after = decodeCursor(query.cursor)
    const max = after !== undefined ? String(after[0]) : `(${until}`
    // The endpoint filter is a member's head (keys.ts): the script reads no entry of another endpoint.
    const head = query.endpoint ? memberOf(query.endpoint, '') : ''
    const reply = (await this.call('list', LIST, [max, String(Math.max(since, Math.ceil(this.oldest()))), after !== undefined ? String(after[1]) : '', String(limit), head, query.outcome ?? '', String(SCAN_CAP)])) as unknown[]
    const rows = (reply[0] ?? []) as unknown[]
    const entries: HistoryEntry[] = []
    for (let i = 0; i + 1 < rows.length; i += 2) entries.push(toEntry(text(rows[i])!, text(rows[i + 1])!))
    const lastMember = text(reply[1])
    const lastScore = text(reply[2])
    return lastMember ? { entries, cursor: encodeCursor([Number(lastScore), lastMember]) } : { entries }
  }

  async get(id: string, endpoint?: string): Promise<HistoryEntry | undefined> {
    const oldest = this.oldest()
    const reply = (await this.call('get', GET, [endpoint === undefined ? '' : memberOf(endpoint, id), id, String(Math.ceil(oldest))])) as unknown[]
    if (!Array.isArray(reply) || reply.length === 0) return undefined
    const entry = toEntry(text(reply[0])!, text(reply[1])!, text(reply[2]))
    return entry.receivedAt < oldest ? undefined : entry
  }

  async refusals(since = 0): Promise<RefusalCount[]> {
    const reply = (await this.call('refusals', REFUSALS, [String(since)])) as unknown[][]
    const out: RefusalCount[] = []
    for (const [w, counts, ids] of reply) {
      const windowStart = Number(text(w))
      const idsByCode = new Map<string, string[]>()
      const idList = (ids ?? []) as unknown[]
      for (let i = 0; i + 1 < idList.length; i += 2) {
        try {
          idsByCode.set(text(idList[i])!, JSON.parse(text(idList[i + 1]) ?? '[]') as string[])
        } catch {
          // An unreadable list shows no ids.
        }
      }
      const countList = (counts ?? []) as unknown[]
      for (let i = 0; i + 1 < countList.length; i += 2) {
        const code = text(countList[i])!
        out.push({ windowStart, code, count: Number(text(countList[i + 1])), claimedIds: idsByCode.get(code) ?? [] })
      }
    }
    return out.sort((a, b) => b.windowStart - a.windowStart || b.count - a.count)
  }

  async size(): Promise<number> {
    return Number(await this.call('size', SIZE, []))
  }
}
