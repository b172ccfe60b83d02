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
import { memberOf, taggedPrefix } from './keys.js'
import { GET, LIST, LIST_FIELD_NAMES, REFUSALS, SIZE, WRITE } from './redis-scripts.js'
import { decodeCursor, encodeCursor, pageOf } from './text.js'
import {
  REFUSAL_RETENTION_MS,
  type HistoryEntry,
  type HistoryOptions,
  type HistoryOutcome,
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

function toEntry(fields: Record<string, string | undefined>, hasBody: boolean): HistoryEntry {
  const num = (name: string) => (fields[name] === undefined ? undefined : Number(fields[name]))
  const e: HistoryEntry = {
    id: fields.id ?? '',
    endpoint: fields.endpoint ?? '',
    receivedAt: num('receivedAt') ?? 0,
    updatedAt: num('updatedAt') ?? 0,
    outcome: (fields.outcome ?? 'accepted') as HistoryOutcome,
    attempts: num('attempts') ?? 0,
    deliveries: num('deliveries') ?? 0,
    replays: num('replays') ?? 0,
    hasBody,
  }
  if (fields.eventType !== undefined) e.eventType = fields.eventType
  if (fields.processedAt !== undefined) e.processedAt = num('processedAt')!
  if (fields.status !== undefined) e.status = num('status')!
  if (fields.code !== undefined) e.code = fields.code
  if (fields.errorName !== undefined) e.errorName = fields.errorName
  if (fields.errorMessage !== undefined) e.errorMessage = fields.errorMessage
  if (fields.replayedAt !== undefined) e.replayedAt = num('replayedAt')!
  if (fields.bodyRedacted !== undefined) e.bodyRedacted = true
  if (fields.body !== undefined) e.body = fields.body
  return e
}

/** A record as the write script reads it (redis-scripts.ts names the fields). */
function flat(r: HistoryRecord): Record<string, unknown> {
  const f: Record<string, unknown> = { m: memberOf(r.endpoint, r.id), id: r.id, ep: r.endpoint, at: r.at, o: r.outcome }
  if (r.soft) f.soft = 1
  if (r.eventType !== undefined) f.t = r.eventType
  if (r.status !== undefined) f.s = r.status
  if (r.code !== undefined) f.c = r.code
  if (r.attempts !== undefined) f.a = r.attempts
  if (r.addAttempt) f.aa = 1
  if (r.delivered) f.d = 1
  if (r.processed) f.p = 1
  if (r.error === null) f.clr = 1
  else if (r.error !== undefined) Object.assign(f, { en: r.error.name, em: r.error.message })
  if (r.body !== undefined) Object.assign(f, { b: r.body, ...(r.bodyRedacted && { br: 1 }) })
  if (r.replay) f.rp = 1
  return f
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
    this.index = `${this.prefix}idx`
  }

  private call(name: string, script: string, args: string[]): Promise<unknown> {
    return withDeadline(`RedisHistory.${name}`, this.timeoutMs, () => this.run(script, this.index, [this.prefix, ...args]))
  }

  protected async write(records: HistoryRecord[], refusals: RefusalCount[]): Promise<void> {
    const windows = refusals.map((r) => ({ w: r.windowStart, code: r.code, n: r.count, ids: r.claimedIds }))
    await this.call('write', WRITE, [
      String(this.now()),
      String(Math.ceil(this.retentionMs)),
      String(this.maxEntries),
      String(REFUSAL_RETENTION_MS),
      // An empty Lua table encodes as {}: both lists are sent as JSON arrays the script decodes.
      JSON.stringify(records.map(flat)),
      JSON.stringify(windows),
    ])
  }

  async list(query: HistoryQuery = {}): Promise<HistoryPage> {
    const { limit, since, until } = pageOf(query)
    const after = decodeCursor(query.cursor)
    const max = after !== undefined ? String(after[0]) : `(${until}`
    const reply = (await this.call('list', LIST, [max, String(since), after !== undefined ? String(after[1]) : '', String(limit), query.endpoint ?? '', query.outcome ?? '', String(SCAN_CAP)])) as unknown[]
    const rows = (reply[0] ?? []) as unknown[][]
    const entries = rows.map((row) => {
      const fields: Record<string, string | undefined> = {}
      LIST_FIELD_NAMES.forEach((name, i) => (fields[name] = text(row[i])))
      return toEntry(fields, Number(row[LIST_FIELD_NAMES.length]) === 1)
    })
    const lastMember = text(reply[1])
    const lastScore = text(reply[2])
    return lastMember ? { entries, cursor: encodeCursor([Number(lastScore), lastMember]) } : { entries }
  }

  async get(id: string, endpoint?: string): Promise<HistoryEntry | undefined> {
    const flatReply = (await this.call('get', GET, [endpoint === undefined ? '' : memberOf(endpoint, id), id])) as unknown[]
    if (!Array.isArray(flatReply) || flatReply.length === 0) return undefined
    const fields: Record<string, string | undefined> = {}
    for (let i = 0; i + 1 < flatReply.length; i += 2) fields[text(flatReply[i])!] = text(flatReply[i + 1])
    return toEntry(fields, fields.body !== undefined)
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
