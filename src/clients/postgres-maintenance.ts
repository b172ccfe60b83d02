/**
 * Tables that look after themselves: the expired rows of PostgresStore and PostgresInbox (its
 * processed keys, and the rows of ordering keys long idle) are deleted by the instances themselves, modelled on pg-boss's maintenance (an unref'd timer, one
 * maintainer at a time through an advisory lock, bounded batches), so nobody has to remember a
 * `sweep()` timer. Each batch is one statement that takes a transaction-level advisory lock
 * (`pg_try_advisory_xact_lock`, keyed by the table) and deletes only when it got it: it needs
 * nothing but `query()`, holds the lock for that statement alone (a crash cannot leave it held),
 * and a process that does not get the lock skips its round, so many receivers on one table do
 * not all scan it at once. Shared by the Postgres engines; not a public entry.
 */
import type { PostgresQueryable } from './postgres.js'

/** Options both Postgres engines take for their maintenance. */
export interface MaintenanceOptions {
  /**
   * How often this instance deletes expired rows, in milliseconds; `false` turns it off (run
   * `sweep()` yourself). The timer is unref'd: it never keeps a process alive.
   * @default 60000
   */
  maintenanceIntervalMs?: number | false
  /**
   * The most rows one statement deletes; a round runs at most 10 of them.
   * @default 1000
   */
  maintenanceBatch?: number
}

/** A round runs at most this many batches: a backlog is worked off over several rounds, never in one long one. */
const MAX_BATCHES = 10

/**
 * One batch's statement: `$1` the batch size, `$2` the lock's name (every statement of one
 * maintenance has this shape: an engine with more than one table to keep gives one per table). Deletes up to `$1` rows of
 * `table` where `expired` holds, found through its index and skipping rows another transaction
 * holds (a claim taking one over), only while this statement holds the table's advisory lock.
 * The outer `expired` test is not redundant: a DELETE that waited on a row re-checks only its own
 * WHERE on the newest row version (READ COMMITTED), and a row taken over since is not expired.
 *
 * @example
 * maintenanceSql('"svc_webhooks_deliveries"', 'expires_at < now()')
 */
export function maintenanceSql(table: string, expired: string): string {
  return `WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtext($2)) AS got),
gone AS (
  DELETE FROM ${table} WHERE key IN (
    SELECT key FROM ${table} WHERE ${expired} AND (SELECT got FROM lock) LIMIT $1 FOR UPDATE SKIP LOCKED
  ) AND ${expired} RETURNING 1
)
SELECT (SELECT got FROM lock) AS got, (SELECT count(*) FROM gone)::int AS n`
}

/** What a maintenance round did: whether it held the lock, and the rows it deleted. */
export interface MaintenanceRound {
  locked: boolean
  deleted: number
}

/**
 * The maintenance of one table: {@link Maintenance.round} runs bounded batches under the advisory
 * lock; the timer started by {@link Maintenance.start} runs a round every interval.
 *
 * @example
 * const maintenance = new Maintenance(pool, maintenanceSql(t, 'expires_at < now()'), t, options, 'PostgresStore')
 * maintenance.start()
 */
export class Maintenance {
  readonly intervalMs: number | false
  readonly batch: number
  private timer: ReturnType<typeof setTimeout> | undefined
  private stopped = false
  private readonly statements: readonly string[]

  constructor(
    private readonly db: PostgresQueryable,
    sql: string | readonly string[],
    private readonly lockName: string,
    { maintenanceIntervalMs = 60_000, maintenanceBatch = 1000 }: MaintenanceOptions,
    owner: string,
  ) {
    if (maintenanceIntervalMs !== false && !(typeof maintenanceIntervalMs === 'number' && Number.isFinite(maintenanceIntervalMs) && maintenanceIntervalMs > 0)) {
      throw new TypeError(`svc-webhooks: ${owner} \`maintenanceIntervalMs\` must be a positive number of milliseconds, or false to turn maintenance off.`)
    }
    if (!Number.isSafeInteger(maintenanceBatch) || maintenanceBatch <= 0) {
      throw new TypeError(`svc-webhooks: ${owner} \`maintenanceBatch\` must be a positive whole number.`)
    }
    this.intervalMs = maintenanceIntervalMs
    this.batch = maintenanceBatch
    this.statements = typeof sql === 'string' ? [sql] : sql
  }

  /** Starts the timer (nothing when maintenance is off). The first round comes one interval from now. */
  start(): void {
    if (this.intervalMs === false || this.stopped) return
    const interval = this.intervalMs
    const next = () => {
      this.timer = setTimeout(() => {
        // A failed round (the database restarting, the table not created yet) waits for the next.
        this.round().then(undefined, () => undefined).finally(() => {
          if (!this.stopped) next()
        })
      }, interval)
      // Never keeps a process alive (Node and Bun have unref; elsewhere the timer is plain).
      ;(this.timer as { unref?: () => void }).unref?.()
    }
    next()
  }

  /** Stops the timer; a round under way finishes its batch. */
  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
  }

  /**
   * One round: for each statement in turn, batches of at most `batch` rows while a batch comes
   * back full, at most 10. Ends at once when another process holds the lock (it is maintaining
   * the table now).
   */
  async round(): Promise<MaintenanceRound> {
    let deleted = 0
    let locked = false
    for (const sql of this.statements) {
      for (let i = 0; i < MAX_BATCHES; i++) {
        const { rows } = await this.db.query(sql, [this.batch, `svc-webhooks maintenance ${this.lockName}`])
        const { got, n } = (rows[0] ?? {}) as { got?: boolean; n?: number }
        if (got !== true) return { locked, deleted }
        locked = true
        deleted += Number(n ?? 0)
        if (Number(n ?? 0) < this.batch) break
      }
    }
    return { locked, deleted }
  }
}
