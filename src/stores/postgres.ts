/**
 * `svc-webhooks/postgres`, for receivers that already run on Postgres: `PostgresStore`, the
 * idempotency store, `PostgresInbox`, the durable inbox (src/inbox/postgres.ts), and
 * `PostgresSecretSource`, the endpoint's secrets shared by every process
 * (postgres-secret-source.ts). The store and the inbox take a `pg` Pool only, never a Client
 * (they must outlive a database restart, and a Client does not reconnect), and time leases and
 * expiries by the database clock. The store keeps one row per delivery id with an expiry column;
 * claim, complete and release are one statement each (INSERT ... ON CONFLICT), so a fresh
 * delivery costs two round trips.
 */
import type { ClaimResult, IdempotencyStore } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { withDeadline } from '../clients/deadline.js'
import { quoteTable, type PostgresQueryable } from '../clients/postgres.js'

export type { PostgresQueryable } from '../clients/postgres.js'
export { PostgresInbox, createInboxTableSql, type PostgresInboxOptions } from '../inbox/postgres.js'
export { PostgresSecretSource, createSecretTableSql, type PostgresSecretSourceOptions } from './postgres-secret-source.js'

/** Options of {@link PostgresStore}. */
export interface PostgresStoreOptions {
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
 * The `CREATE TABLE` (and expiry index) statement for the store's table, for your migrations.
 *
 * @example
 * await pool.query(createTableSql('webhooks.deliveries'))
 */
export function createTableSql(table = 'svc_webhooks_deliveries'): string {
  const name = quoteTable(table)
  const index = `"${table.replace('.', '_')}_expires_at"`
  return `CREATE TABLE IF NOT EXISTS ${name} (
  key text PRIMARY KEY,
  owner text NOT NULL,
  completed boolean NOT NULL DEFAULT false,
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ${index} ON ${name} (expires_at);`
}

/**
 * Idempotency store on Postgres. A claim inserts the row, or takes over one whose lease or
 * retention has expired; the row's `owner` lets only the claimant release it. Expired rows stay
 * until `sweep()` deletes them: run it from a cron job or a timer.
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
  private readonly sql: { claim: string; complete: string; release: string; sweep: string }

  constructor({ pool, client, table = 'svc_webhooks_deliveries', timeoutMs = 2000 }: PostgresStoreOptions) {
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
    this.table = table
    this.timeoutMs = timeoutMs
    const expiry = `now() + interval '1 millisecond' * $3::float8`
    this.sql = {
      // Takes the row when it is new, expired, or already ours (a retried statement). When it is
      // not taken, the row tells completed from in flight, and it must be the row as it is now:
      // under READ COMMITTED, ON CONFLICT waits for a concurrent claim's lock and re-checks its
      // WHERE on the newest row version, but a plain sub-select in the same statement reads the
      // statement's snapshot, which can still hold the expired completion that the other claim
      // has just taken over, and would answer completed for a delivery nobody has processed.
      // FOR SHARE makes the sub-select follow the row to its newest version (the one the ON
      // CONFLICT has locked, so it does not wait), and a completion counts only while it lasts.
      // No row (deleted, or too new for the snapshot: just claimed by someone else) is in flight.
      claim: `WITH taken AS (
  INSERT INTO ${t} AS d (key, owner, completed, expires_at) VALUES ($1, $2, false, ${expiry})
  ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, completed = false, expires_at = EXCLUDED.expires_at
  WHERE d.expires_at <= now() OR (d.owner = EXCLUDED.owner AND NOT d.completed)
  RETURNING 1
)
SELECT CASE
  WHEN EXISTS (SELECT 1 FROM taken) THEN 'claimed'
  WHEN (SELECT completed AND expires_at > now() FROM ${t} WHERE key = $1 FOR SHARE) THEN 'completed'
  ELSE 'in_flight' END AS state`,
      // Records the completion either way; `owner` keeps our token only if we held the claim.
      complete: `INSERT INTO ${t} AS d (key, owner, completed, expires_at) VALUES ($1, '', true, ${expiry})
ON CONFLICT (key) DO UPDATE SET completed = true, expires_at = EXCLUDED.expires_at,
  owner = CASE WHEN d.owner = $2 AND (d.completed OR d.expires_at > now()) THEN d.owner ELSE '' END
RETURNING owner = $2 AS owned`,
      release: `DELETE FROM ${t} WHERE key = $1 AND owner = $2 AND NOT completed RETURNING 1`,
      // The outer expiry test is not redundant: a DELETE that waited on a row a claim has just
      // taken over re-checks only its own WHERE on the newest row version (READ COMMITTED); the
      // sub-select's answer comes from the old snapshot, and alone it would delete the new claim.
      sweep: `DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at < now() LIMIT $1) AND expires_at < now() RETURNING 1`,
    }
  }

  /**
   * Creates the table and its expiry index if they do not exist.
   *
   * @example
   * await new PostgresStore({ pool }).ensureTable()
   */
  async ensureTable(): Promise<void> {
    await this.db.query(createTableSql(this.table))
  }

  /**
   * Deletes up to `limit` expired rows (finished leases and retention windows) and says how many.
   *
   * @example
   * setInterval(() => store.sweep().catch(console.error), 60_000).unref()
   */
  async sweep(limit = 10_000): Promise<number> {
    const { rows } = await this.db.query(this.sql.sweep, [limit])
    return rows.length
  }

  async claim(key: string, owner: string, leaseMs: number): Promise<ClaimResult> {
    const values = [key, owner, Math.max(1, Math.ceil(leaseMs))]
    try {
      const { rows } = await withDeadline('PostgresStore.claim', this.timeoutMs, () => this.db.query(this.sql.claim, values), { onLate: (late) => {
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

  async complete(key: string, owner: string, retentionMs: number): Promise<boolean> {
    const values = [key, owner, Math.max(1, Math.ceil(retentionMs))]
    const { rows } = await withDeadline('PostgresStore.complete', this.timeoutMs, () => this.db.query(this.sql.complete, values))
    return (rows[0] as { owned?: unknown } | undefined)?.owned === true
  }

  async release(key: string, owner: string): Promise<boolean> {
    const { rows } = await withDeadline('PostgresStore.release', this.timeoutMs, () => this.db.query(this.sql.release, [key, owner]))
    return rows.length > 0
  }
}
