/**
 * `PostgresStore` (`svc-webhooks/postgres`, src/entries/postgres.ts): the idempotency store on
 * Postgres; its statements are in postgres-sql.ts. The store and the inbox take a `pg` Pool only,
 * never a Client (they must outlive a database restart, and a Client does not reconnect), and time
 * leases and expiries by the database clock. The store keeps one row per delivery id with an expiry column;
 * claim, complete and release are one statement each (INSERT ... ON CONFLICT), so a fresh
 * delivery costs two round trips.
 */
import type { ClaimResult, IdempotencyStore } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { budget, unchecked, withDeadline } from '../clients/deadline.js'
import { PreparedStatements, quoteTable, serializedDdl, standbyWarnings, STANDBY_SETTINGS, type PostgresQueryable } from '../clients/postgres.js'
import { Maintenance, maintenanceSql, type MaintenanceOptions, type MaintenanceRound } from '../clients/postgres-maintenance.js'
import { createTableSql, storeStatements, type StoreStatements } from './postgres-sql.js'


/** Options of {@link PostgresStore}. */
export interface PostgresStoreOptions extends MaintenanceOptions {
  /**
   * A `pg` Pool (`new pg.Pool({ ..., max: 1 })` for a single connection): a Pool opens fresh
   * connections after the database restarts. Attach `pool.on('error', ...)`: an idle connection
   * dropped by a restart emits one.
   */
  pool: PostgresQueryable
  /**
   * Not accepted: a `pg.Client` never reconnects after a database restart, so every later
   * operation would fail (503 for good). Pass `pool`.
   * @deprecated Removed: a TypeError at construction.
   */
  client?: never
  /**
   * The table, optionally schema-qualified (`schema.table`). Create it with `ensureTable()` or
   * the statement from `createTableSql()`.
   * @default 'svc_webhooks_deliveries'
   */
  table?: string
  /**
   * Longest wait for one operation, retries included. Past it the operation rejects and the
   * receiver answers 503 (the sender retries).
   * @default 2000
   */
  timeoutMs?: number
}

/**
 * Idempotency store on Postgres. A claim inserts the row, or takes over one whose lease or
 * retention has expired; the row's `owner` lets only the claimant release it. Expired rows are
 * deleted by the store itself every `maintenanceIntervalMs` (an unref'd timer, one process at a
 * time, bounded batches); `sweep()` does the same on demand.
 *
 * @example
 * import pg from 'pg'
 * import { PostgresStore } from 'svc-webhooks/postgres'
 * const store = new PostgresStore({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) })
 * await store.ensureTable()
 * const receiver = createWebhookReceiver({ secret, store, on })
 */
export class PostgresStore implements IdempotencyStore {
  readonly table: string
  readonly timeoutMs: number
  private readonly db: PostgresQueryable
  /** Its statements go prepared, once per connection (src/clients/postgres.ts). */
  private readonly statements: PreparedStatements
  private readonly sql: StoreStatements
  private readonly maintenance: Maintenance

  constructor({ pool, client, table = 'svc_webhooks_deliveries', timeoutMs = 2000, ...maintenance }: PostgresStoreOptions) {
    if (client !== undefined) {
      throw new TypeError(
        'svc-webhooks: PostgresStore takes `pool` (new pg.Pool(...)), not `client`: a pg.Client does not reconnect after the database restarts, so every later claim would fail and every delivery be answered 503. For one connection pass new pg.Pool({ ..., max: 1 }).',
      )
    }
    const db = pool
    if (typeof db?.query !== 'function') {
      throw new TypeError('svc-webhooks: PostgresStore needs `pool`, a pg Pool (new pg.Pool(...)).')
    }
    positiveOption(timeoutMs, 'PostgresStore `timeoutMs`')
    const t = quoteTable(table)
    this.db = db
    this.statements = new PreparedStatements(db)
    this.table = table
    this.timeoutMs = timeoutMs
    this.sql = storeStatements(t)
    this.maintenance = new Maintenance(db, maintenanceSql(t, 'expires_at < now()'), t, maintenance, 'PostgresStore')
    this.maintenance.start()
  }

  /**
   * One maintenance round now, as the timer runs it: expired rows deleted in batches of
   * `maintenanceBatch`, unless another process holds the table's maintenance lock.
   *
   * @example
   * const { locked, deleted } = await store.maintain()
   */
  maintain(): Promise<MaintenanceRound> {
    return this.maintenance.round()
  }

  /**
   * Stops the maintenance timer (it is unref'd, so a process exits without this).
   *
   * @example
   * store.close()
   */
  close(): void {
    this.maintenance.stop()
  }

  /**
   * Creates the table and its expiry index if they do not exist.
   *
   * @example
   * await new PostgresStore({ pool }).ensureTable()
   */
  async ensureTable(): Promise<void> {
    await this.db.query(serializedDdl(this.table, createTableSql(this.table)))
  }

  /**
   * Deletes up to `limit` expired rows (finished leases and retention windows) and says how many.
   *
   * @example
   * await store.sweep() // from your own scheduler, with maintenanceIntervalMs: false
   */
  async sweep(limit = 10_000): Promise<number> {
    const { rows } = await this.statements.query(this.db, this.sql.sweep, [limit])
    return rows.length
  }

  async claim(key: string, owner: string, leaseMs: number, deadline?: number): Promise<ClaimResult> {
    const values = [key, owner, Math.max(1, Math.ceil(leaseMs))]
    try {
      const { rows } = await withDeadline('PostgresStore.claim', budget(this.timeoutMs, deadline), () => this.statements.query(this.db, this.sql.claim, values), { onLate: (late) => {
        // The claim landed after we answered 503: give the id back so the retry is not held for a lease.
        if ((late.rows[0] as { state?: string } | undefined)?.state === 'claimed') this.release(key, owner).catch(() => undefined)
      } })
      const state = (rows[0] as { state?: unknown } | undefined)?.state
      if (state === 'claimed' || state === 'completed' || state === 'in_flight') return state
      throw new Error('svc-webhooks: PostgresStore.claim got an unexpected result from the database.')
    } catch (error) {
      this.release(key, owner).catch(() => undefined)
      throw error
    }
  }

  async complete(key: string, owner: string, retentionMs: number, deadline?: number): Promise<boolean> {
    const values = [key, owner, Math.max(1, Math.ceil(retentionMs))]
    const { rows } = await withDeadline('PostgresStore.complete', budget(this.timeoutMs, deadline), () => this.statements.query(this.db, this.sql.complete, values))
    return (rows[0] as { owned?: unknown } | undefined)?.owned === true
  }

  async release(key: string, owner: string): Promise<boolean> {
    const { rows } = await withDeadline('PostgresStore.release', this.timeoutMs, () => this.statements.query(this.db, this.sql.release, [key, owner]))
    return rows.length > 0
  }

  /**
   * What in the database's replication breaks the store's promise: a standby no commit waits
   * for (a promote loses completions already answered 2xx, so a resend runs the handler again),
   * or `synchronous_commit` `local`/`off` in front of a synchronous one. One line each, empty when
   * none (a database without standbys included); one line saying so when it cannot be read.
   * Never rejects.
   *
   * @example
   * for (const line of await store.durabilityWarnings()) console.warn(line)
   */
  async durabilityWarnings(): Promise<string[]> {
    try {
      const { rows } = await withDeadline('PostgresStore.durabilityWarnings', this.timeoutMs, () => this.db.query(STANDBY_SETTINGS))
      return standbyWarnings(rows[0] as Parameters<typeof standbyWarnings>[0], 'PostgresStore')
    } catch (error) {
      return [`svc-webhooks: PostgresStore could not check the database's standbys (${unchecked(error)}).`]
    }
  }
}
