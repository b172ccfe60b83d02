/**
 * `PostgresHistory` (`svc-webhooks/postgres`): the history in a Postgres table, shared by every
 * receiver and worker process. Records are written in batches, one statement per batch
 * (postgres-sql.ts), after the answer: the claim and the append are the store's and the inbox's
 * statements on their own pools, and a history write joined to them would put its failure on the
 * answer's path. Trimming (the expired, the oldest past `maxEntries`, old refusal windows) rides
 * on a write at most once a minute, a slice at a time.
 */
import { PreparedStatements, quoteTable, serializedDdl, type PostgresQueryable } from '../clients/postgres.js'
import { withDeadline } from '../clients/deadline.js'
import { positiveOption } from '../option-checks.js'
import { BatchedHistory } from './batcher.js'
import { memberOf } from './keys.js'
import { createHistoryTableSql, historyStatements } from './postgres-sql.js'
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

export { createHistoryTableSql }

/** Options of {@link PostgresHistory}. */
export interface PostgresHistoryOptions extends HistoryOptions {
  /** A `pg` Pool. */
  pool: PostgresQueryable
  /**
   * The entries' table (the refusal counts go to `<table>_refusals`). Create both with
   * `ensureTable()` or `createHistoryTableSql()`.
   * @default 'svc_webhooks_history'
   */
  table?: string
  /**
   * Longest wait for a read or a batch write.
   * @default 2000
   */
  timeoutMs?: number
}

const TRIM_EVERY_MS = 60_000

type Row = Record<string, unknown>

function toEntry(row: Row): HistoryEntry {
  const num = (v: unknown) => (v === null || v === undefined ? undefined : Number(v))
  const e: HistoryEntry = {
    id: String(row.id),
    endpoint: String(row.endpoint),
    receivedAt: num(row.received_at) ?? 0,
    updatedAt: num(row.updated_at) ?? 0,
    outcome: String(row.outcome) as HistoryOutcome,
    attempts: num(row.attempts) ?? 0,
    deliveries: num(row.deliveries) ?? 0,
    replays: num(row.replays) ?? 0,
    hasBody: row.has_body === true,
  }
  if (row.event_type !== null && row.event_type !== undefined) e.eventType = String(row.event_type)
  if (row.processed_at !== null && row.processed_at !== undefined) e.processedAt = Number(row.processed_at)
  if (row.status !== null && row.status !== undefined) e.status = Number(row.status)
  if (row.code !== null && row.code !== undefined) e.code = String(row.code)
  if (row.error_name !== null && row.error_name !== undefined) e.errorName = String(row.error_name)
  if (row.error_message !== null && row.error_message !== undefined) e.errorMessage = String(row.error_message)
  if (row.replayed_at !== null && row.replayed_at !== undefined) e.replayedAt = Number(row.replayed_at)
  if (row.body_redacted === true) e.bodyRedacted = true
  if (typeof row.body === 'string') e.body = row.body
  return e
}

function flat(r: HistoryRecord): Record<string, unknown> {
  return {
    ep: r.endpoint, id: r.id, at: r.at, o: r.outcome, soft: r.soft ?? false, t: r.eventType ?? null, s: r.status ?? null, c: r.code ?? null,
    a: r.attempts ?? null, aa: r.addAttempt ?? false, d: r.delivered ?? false, p: r.processed ?? false,
    en: r.error ? r.error.name : null, em: r.error ? r.error.message : null, clr: r.error === null,
    b: r.body ?? null, br: r.bodyRedacted ?? false, rp: r.replay ?? false,
  }
}

/**
 * History in Postgres: bounded (`maxEntries`, default 1,000,000), each entry kept `retentionMs`
 * (default 7 days) from its arrival.
 *
 * @example
 * import pg from 'pg'
 * import { PostgresHistory } from 'svc-webhooks/postgres'
 * const history = new PostgresHistory({ pool: new pg.Pool(), keepBodies: true })
 * await history.ensureTable()
 */
export class PostgresHistory extends BatchedHistory {
  readonly table: string
  private readonly db: PostgresQueryable
  /** Its statements go prepared, once per connection (src/clients/postgres.ts). */
  private readonly statements: PreparedStatements
  private readonly sql: ReturnType<typeof historyStatements>
  private trimmedAt = -Infinity

  constructor(options: PostgresHistoryOptions) {
    const { pool, table = 'svc_webhooks_history', timeoutMs = 2000 } = options
    if (typeof pool?.query !== 'function') throw new TypeError('svc-webhooks: PostgresHistory needs `pool`, a pg Pool (new pg.Pool(...)).')
    positiveOption(timeoutMs, 'PostgresHistory `timeoutMs`')
    quoteTable(table, 'PostgresHistory')
    super('PostgresHistory', options, timeoutMs)
    this.db = pool
    this.statements = new PreparedStatements(pool)
    this.table = table
    this.sql = historyStatements(table)
  }

  /** Creates the tables if they do not exist. */
  async ensureTable(): Promise<void> {
    await this.db.query(serializedDdl(this.table, createHistoryTableSql(this.table)))
  }

  private query(name: string, text: string, values: unknown[]): Promise<{ rows: unknown[] }> {
    return withDeadline(`PostgresHistory.${name}`, this.timeoutMs, () => this.statements.query(this.db, text, values))
  }

  protected async write(records: HistoryRecord[], refusals: RefusalCount[]): Promise<void> {
    // One statement cannot change a row twice: records of one id go in successive rounds.
    let rest = records
    for (let round = 0; rest.length > 0 && round < records.length; round++) {
      const seen = new Set<string>()
      const now: HistoryRecord[] = []
      const later: HistoryRecord[] = []
      for (const r of rest) {
        const key = memberOf(r.endpoint, r.id)
        if (seen.has(key)) later.push(r)
        else {
          seen.add(key)
          now.push(r)
        }
      }
      const json = JSON.stringify(now.map(flat))
      const { rows } = await this.query('write', this.sql.write, [json])
      // A row inserted by another process between the UPDATE and the INSERT: once more finds it.
      if (Number((rows[0] as Row | undefined)?.applied) < now.length) await this.query('write', this.sql.write, [json])
      rest = later
    }
    if (refusals.length > 0) {
      await this.query('refusals', this.sql.refusals, [JSON.stringify(refusals.map((r) => ({ w: r.windowStart, code: r.code, n: r.count, ids: r.claimedIds })))])
    }
    const at = this.now()
    if (at - this.trimmedAt >= TRIM_EVERY_MS) {
      this.trimmedAt = at
      await this.query('trim', this.sql.trimExpired, [at - this.retentionMs])
      await this.query('trim', this.sql.trimOver, [this.maxEntries])
      await this.query('trim', this.sql.trimRefusals, [at - REFUSAL_RETENTION_MS])
    }
  }

  async list(query: HistoryQuery = {}): Promise<HistoryPage> {
    const { limit, since, until } = pageOf(query)
    const after = decodeCursor(query.cursor)
    const { rows } = await this.query('list', this.sql.list, [
      since, until, query.endpoint ?? null, query.outcome ?? null,
      after ? Number(after[0]) : null, after ? String(after[1]) : null, after ? String(after[2]) : null, limit,
    ])
    const entries = (rows as Row[]).map(toEntry)
    const last = entries[entries.length - 1]
    return entries.length === limit && last ? { entries, cursor: encodeCursor([last.receivedAt, last.endpoint, last.id]) } : { entries }
  }

  async get(id: string, endpoint?: string): Promise<HistoryEntry | undefined> {
    const { rows } = await this.query('get', this.sql.get, [id, endpoint ?? null])
    const row = rows[0] as Row | undefined
    return row ? toEntry(row) : undefined
  }

  async refusals(since = 0): Promise<RefusalCount[]> {
    const { rows } = await this.query('refusals', this.sql.listRefusals, [since])
    return (rows as Row[]).map((row) => ({ windowStart: Number(row.window_start), code: String(row.code), count: Number(row.count), claimedIds: (row.claimed_ids as string[]) ?? [] }))
  }

  async size(): Promise<number> {
    const { rows } = await this.query('size', this.sql.size, [])
    return Number((rows[0] as Row | undefined)?.n ?? 0)
  }
}
