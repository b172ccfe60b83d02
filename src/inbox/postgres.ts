/**
 * `PostgresInbox` (`svc-webhooks/postgres`): the durable inbox on a Postgres the receiver
 * already runs (DESIGN.md "Durable inbox"). Two tables, every clock reading is the database's
 * `now()`, and every operation is one statement (src/inbox/postgres-sql.ts), except an append
 * with several keys, which is one transaction.
 *
 * Why this structure:
 *
 * - **Deliveries** (`<table>`): one row per accepted delivery, keyed by its first key, with the
 *   body as `bytea` (bytes in, the same bytes out; no text encoding touches them). A row is
 *   `queued` or `dead`; dead letters stay in the same table, so bury and requeue flip a column
 *   instead of copying a row that holds the body.
 * - **One visibility time** (`visible_at`) instead of `due_at` plus `lease_until`, as in SQS's
 *   visibility timeout: the row may be taken once `visible_at <= now()`. Append sets it to now,
 *   take to the end of the lease, retry to the retry time. So an expired lease needs no write
 *   to become due again, `take` reads one partial index in order, and "is this lease still held"
 *   is `lease = $token AND visible_at > now()`.
 * - **Keys** (`<table>_keys`): one row per dedupe key. Its primary key is the dedupe: an append
 *   inserts every key with `INSERT ... ON CONFLICT DO UPDATE ... WHERE the old row has expired`
 *   and is accepted only when every key came back. Under READ COMMITTED that is the one check
 *   that cannot be raced: a conflicting insert by another append waits for that append to commit
 *   or roll back, and the takeover of an expired key re-checks its WHERE on the newest row
 *   version, so of ten appends of one key exactly one gets it back (a `SELECT` first would read
 *   a snapshot that misses a concurrent append). A key stays held (`processed_until` null) while
 *   its delivery is queued or dead; completing it sets `processed_until` to now + retention, the
 *   window in which a resend is a duplicate; `sweep()` deletes the expired ones.
 * - **Why a transaction for several keys**: a v1 delivery has a replay key besides its id key.
 *   When one is new and the other is held, the statement inserts the new one and must not keep
 *   it (a key held by no delivery would answer every resend "duplicate" while nothing processes
 *   it), and a statement cannot undo its own insert. So that append runs in BEGIN ... COMMIT and
 *   rolls back unless every key was claimed. Keys are inserted in sorted order, so two appends
 *   sharing two keys lock them in the same order and cannot deadlock.
 * - **Concurrent workers**: `take` selects due rows `FOR UPDATE SKIP LOCKED` and leases them in
 *   the same statement, so two workers never take one row and never wait on each other; a fresh
 *   lease token per row (`gen_random_uuid()`, Postgres 13+) is checked by complete, retry, bury
 *   and extend, so a worker whose lease expired cannot finish what another has taken over.
 * - **The database's clock only**: due times, leases and retention are all `now()` on the
 *   server, so workers on machines whose clocks disagree still agree on who holds a lease. (Only
 *   `receivedAt` comes from the receiver, as the delivery carries it.)
 * - **Cheap stats**: partial indexes on queued rows (by `visible_at`, by `received_at`), on
 *   retried rows and on dead rows, so each figure is read from a small index (the counts cost
 *   time in proportion to the depth, which is what a queue table can offer without a counter
 *   row every append would have to lock).
 * - **Acks are idempotent per lease**: complete records its lease on the keys it marks processed
 *   (`completed_by`), retry and bury on the row (`acked_lease`), so the same ack repeated after one
 *   that committed unseen (a reply lost with the connection, a database restart) answers true,
 *   and a worker can retry an ack for as long as its lease lasts without running the handler twice.
 * - **Takes counted at take** (`takes`, in the take's own UPDATE), reset with `attempts` by a
 *   requeue, which also sets `retries_since`: a requeued dead letter gets a full retry budget.
 * - **A pool, never a single client**: a `pg.Client` does not reconnect, so after a database
 *   restart every operation would fail for good; a Pool opens fresh connections.
 * - **Errors classified**: an error the database answered that repeating will not fix (a NUL in
 *   text, a string too long, a missing table) rejects at once with an `InboxError` of kind
 *   `refused`; no answer within `timeoutMs` (down, restarting, a dropped connection) rejects with
 *   kind `unavailable`.
 */
import { isPostgresRefusal, PreparedStatements, serializedDdl, standbyWarnings, STANDBY_SETTINGS, type PostgresQueryable } from '../clients/postgres.js'
import { positiveOption } from '../option-checks.js'
import { budget, inboxDeadline, unchecked } from '../clients/deadline.js'
import { Maintenance, maintenanceSql, type MaintenanceOptions, type MaintenanceRound } from '../clients/postgres-maintenance.js'
import { DEFAULT_TABLE, createInboxTableSql, names, statements, type Statements } from './postgres-sql.js'
import {
  InboxError,
  type AppendResult,
  type DeadLetter,
  type InboxDelivery,
  type InboxEntry,
  type InboxStats,
  type WebhookInbox,
} from '../contracts/inbox.js'
import { DEFAULT_RETENTION_MS } from '../contracts/store.js'
import { OrderedEngine } from './ordered-engine.js'
import { filingToStore, type InboxOrderingOption } from './ordering.js'
import { PostgresOrder, storedKey } from './postgres-order.js'
import { orderMaintenanceSql } from './postgres-order-sql.js'
import { flowStats } from './flow-stats.js'
import type { OrderedEntry } from '../contracts/ordering.js'

export { createInboxTableSql }

/** A connection checked out of a pool (a `pg` `PoolClient`). */
interface PostgresConnection extends PostgresQueryable {
  release(destroy?: Error | boolean): void
}

/** The part of a `pg` `Pool` the inbox uses: statements, and a connection for a transaction. */
interface PostgresPool extends PostgresQueryable {
  connect(): Promise<PostgresConnection>
  on?(event: 'error', listener: (error: Error) => void): unknown
}

/** Options of {@link PostgresInbox}. */
export interface PostgresInboxOptions extends MaintenanceOptions, InboxOrderingOption {
  /**
   * A `pg` Pool (`new pg.Pool(...)`; `max: 1` for a single connection). A Pool, not a Client: a
   * Client does not reconnect after the database restarts, a Pool opens a fresh connection.
   */
  pool: PostgresPool
  /**
   * Not accepted: a `pg.Client` never reconnects after a database restart, so every later
   * operation would fail. Pass `pool` (a `new pg.Pool({ ..., max: 1 })` for one connection).
   * @deprecated Removed: a TypeError at construction.
   */
  client?: never
  /**
   * The deliveries table, optionally schema-qualified (`schema.table`); the keys table is
   * `<table>_keys`. Create (or upgrade) both with `ensureTable()` or the statements from
   * `createInboxTableSql()`.
   * @default 'svc_webhooks_inbox'
   */
  table?: string
  /**
   * How long the keys of a processed delivery are remembered, so a resend is answered 200 duplicate.
   * @default 259200000 (72 h)
   */
  retentionMs?: number
  /**
   * Longest wait for one operation, retries included. Past it the operation rejects: the
   * receiver answers 503 (the sender retries) and a worker waits and tries again.
   * @default 2000
   */
  timeoutMs?: number
}

/** A deliveries row as the statements return it. */
interface Row {
  keys: string[]
  endpoint: string
  id: string
  signed_timestamp: number
  signature_version: 'v2' | 'v1'
  secret_index: number
  body: Uint8Array
  received_ms: number
  attempts: number
  takes: number
  retries_since_ms: number
  last_error: string | null
  lease: string | null
  dead_ms: number | null
  traceparent: string | null
}

/** Pools already given an 'error' listener: one each, however many inboxes share a pool. */
const listened = new WeakSet<object>()

function delivery(row: Row): InboxDelivery {
  return {
    keys: row.keys,
    endpoint: row.endpoint,
    id: row.id,
    timestamp: row.signed_timestamp,
    signatureVersion: row.signature_version,
    secretIndex: row.secret_index,
    // A copy as a plain Uint8Array: pg hands a Buffer, which may share a pooled allocation.
    rawBody: new Uint8Array(row.body),
    receivedAt: Math.round(row.received_ms),
    ...(row.traceparent ? { traceparent: row.traceparent } : {}),
  }
}

/**
 * A durable inbox on Postgres. Accepted deliveries survive a restart of the receiver, the
 * workers and the database (as far as its `fsync` and `synchronous_commit` make commits
 * durable: `durabilityWarnings()` says when they do not), and the same object answers again once
 * a restarted database is back. Processed keys are deleted by the inbox itself once their
 * retention has passed (every `maintenanceIntervalMs`, one process at a time). Every method rejects with an
 * `InboxError` (`unavailable` or `refused`) when the database fails it, a TypeError when called
 * with arguments that are not what it takes.
 *
 * @example
 * import pg from 'pg'
 * import { createInboxWorker } from 'svc-webhooks'
 * import { PostgresInbox } from 'svc-webhooks/postgres'
 * const inbox = new PostgresInbox({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) })
 * await inbox.ensureTable()
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 */
export class PostgresInbox extends OrderedEngine implements WebhookInbox {
  readonly table: string
  readonly retentionMs: number
  readonly timeoutMs: number
  private readonly pool: PostgresPool
  /** Every parameterized statement goes prepared, once per connection (src/clients/postgres.ts). */
  private readonly statements: PreparedStatements
  private readonly sql: Statements
  /** Ordering and flow control (src/inbox/postgres-order.ts). */
  protected readonly order: PostgresOrder
  /** The table's statements lack `<table>_complete_next` (see completeNext): complete only. */
  private withoutCompleteNext = false
  private readonly maintenance: Maintenance

  constructor({ pool, client, table = DEFAULT_TABLE, retentionMs = DEFAULT_RETENTION_MS, timeoutMs = 2000, ordering, ...maintenance }: PostgresInboxOptions) {
    super(ordering, 'PostgresInbox')
    if (client !== undefined) {
      throw new TypeError(
        'svc-webhooks: PostgresInbox takes `pool` (new pg.Pool(...)), not `client`: a pg.Client does not reconnect after the database restarts, so every later operation would fail. For one connection pass new pg.Pool({ ..., max: 1 }).',
      )
    }
    if (typeof pool?.query !== 'function' || typeof pool.connect !== 'function') {
      throw new TypeError('svc-webhooks: PostgresInbox needs `pool`, a pg Pool (new pg.Pool(...)): it needs query() and connect().')
    }
    positiveOption(retentionMs, 'PostgresInbox `retentionMs`')
    positiveOption(timeoutMs, 'PostgresInbox `timeoutMs`')
    this.sql = statements(names(table))
    // A restart drops the pool's idle connections, and a pg Pool emits 'error' for each: with no
    // listener that event ends the process. The pool replaces them on the next query; the
    // operation that needed one answers `unavailable` until the database is back.
    if (!listened.has(pool)) {
      listened.add(pool)
      pool.on?.('error', () => undefined)
    }
    this.pool = pool
    this.statements = new PreparedStatements(pool)
    this.table = table
    this.retentionMs = retentionMs
    this.timeoutMs = timeoutMs
    this.order = new PostgresOrder({
      table,
      run: (what, attempt) => this.run(what, attempt),
      query: (text, values) => this.statements.query(this.pool, text, values),
      entryOf: (row) => entryOf(row as Row),
      retentionMs,
    })
    // Processed keys past their retention, and the rows of ordering keys idle that long, go on
    // their own: no sweep() timer to forget.
    const keys = names(table).keys
    const batchStatements = [maintenanceSql(keys, 'processed_until < now()'), orderMaintenanceSql(table, retentionMs)]
    this.maintenance = new Maintenance(pool, batchStatements, keys, maintenance, 'PostgresInbox')
    this.maintenance.start()
  }

  /**
   * One maintenance round now, as the timer runs it: processed keys past their retention, then the
   * rows of ordering keys with nothing queued and untouched for as long, deleted in batches of
   * `maintenanceBatch`, unless another process holds the table's maintenance lock.
   *
   * @example
   * const { locked, deleted } = await inbox.maintain()
   */
  maintain(): Promise<MaintenanceRound> {
    return this.maintenance.round()
  }

  /**
   * Stops the maintenance timer (it is unref'd, so a process exits without this).
   *
   * @example
   * inbox.close()
   */
  close(): void {
    this.maintenance.stop()
  }

  /**
   * Creates the two tables and their indexes if they do not exist, and adds the columns an
   * earlier version's tables lack.
   *
   * @example
   * await new PostgresInbox({ pool }).ensureTable()
   */
  async ensureTable(): Promise<void> {
    await this.run('ensureTable', () => this.pool.query(serializedDdl(this.table, createInboxTableSql(this.table))))
  }

  /**
   * Deletes up to `limit` processed keys whose retention has passed and says how many (and, in
   * the same statement, up to `limit` rows of ordering keys with nothing queued and idle as long).
   *
   * @example
   * await inbox.sweep() // from your own scheduler, with maintenanceIntervalMs: false
   */
  async sweep(limit = 10_000): Promise<number> {
    return (await this.first<{ n: number }>('sweep', this.sql.sweep, [limit, this.retentionMs])).n
  }

  async append(entry: InboxDelivery, deadline?: number): Promise<AppendResult> {
    const keys = entry.keys
    if (!Array.isArray(keys) || keys.length === 0 || !keys.every((key) => typeof key === 'string')) {
      throw new TypeError('svc-webhooks: PostgresInbox.append needs a delivery with at least one key.')
    }
    const values = [keys[0], [...keys], entry.endpoint, entry.id, entry.timestamp, entry.signatureVersion, entry.secretIndex, entry.rawBody, entry.receivedAt, entry.traceparent ?? null]
    const filed = filingToStore(this.ordering, entry)
    const text = filed ? this.sql.appendFiled : this.sql.append
    if (filed) values.push(storedKey(filed.key), filed.order)
    const single = new Set(keys).size === 1
    // A retried attempt after one that committed unseen finds its own keys and says duplicate,
    // and an append that lands after the deadline stays queued: either way the delivery is in
    // the inbox once, and the sender's next try is answered 200 duplicate.
    const accepted = await this.run('append', () =>
      single
        ? this.statements.query(this.pool, text, values).then(isAccepted)
        : this.transaction(async (db) => {
            // Unnamed: a name the server lost would abort the transaction, not only the statement.
            const ok = isAccepted(await db.query(text, values))
            return { result: ok, commit: ok }
          }),
      undefined,
      deadline,
    )
    return accepted ? 'accepted' : 'duplicate'
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    if (!(max >= 1)) return []
    const { rows } = await this.run(
      'take',
      () => this.statements.query(this.pool, this.sql.take, [Math.floor(max), visibilityMs]),
      (late) => {
        // Nobody will run what a take leased after the deadline: without this the rows would
        // wait out the whole visibility timeout (a minute by default) before another take.
        const taken = late.rows as Row[]
        if (taken.length === 0) return
        const keys = taken.map((row) => row.keys[0])
        const leases = taken.map((row) => row.lease)
        this.run('take', () => this.statements.query(this.pool, this.sql.handBack, [keys, leases])).catch(() => undefined)
      },
    )
    return (rows as Row[]).map(entryOf)
  }

  async complete(entry: InboxEntry): Promise<boolean> {
    return this.done('complete', this.sql.complete, [entry.keys[0], entry.lease, this.retentionMs])
  }

  /**
   * Completes a head of an ordered worker and leases its key's next head to it in the same round
   * trip, when a take would lease it now (`OrderingEngine.completeNext`).
   */
  async completeNext(entry: OrderedEntry, visibilityMs: number, chain: boolean): Promise<{ done: boolean; next?: OrderedEntry }> {
    if (!this.withoutCompleteNext) {
      const done = await this.order.completeWithNext(entry, visibilityMs, chain)
      if (done) return done
      this.withoutCompleteNext = true
    }
    return { done: await this.complete(entry) }
  }

  async retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean> {
    if (!Number.isFinite(delayMs)) throw new TypeError('svc-webhooks: PostgresInbox.retry needs a finite `delayMs`.')
    return this.done('retry', this.sql.retry, [entry.keys[0], entry.lease, error, Math.max(0, delayMs)])
  }

  async bury(entry: InboxEntry, error: string): Promise<boolean> {
    return this.done('bury', this.sql.bury, [entry.keys[0], entry.lease, error])
  }

  async extend(entry: InboxEntry, visibilityMs: number): Promise<boolean> {
    positiveOption(visibilityMs, 'PostgresInbox.extend `visibilityMs`')
    return this.done('extend', this.sql.extend, [entry.keys[0], entry.lease, visibilityMs])
  }

  async dead(limit = 100): Promise<DeadLetter[]> {
    const { rows } = await this.run('dead', () => this.statements.query(this.pool, this.sql.dead, [limit]))
    return (rows as Row[]).map((row) => ({ ...delivery(row), attempts: row.attempts, takes: row.takes, lastError: row.last_error ?? '', deadAt: Math.round(row.dead_ms!) }))
  }

  async requeue(key: string): Promise<boolean> {
    return this.done('requeue', this.sql.requeue, [key])
  }

  async purge(key: string): Promise<boolean> {
    return this.done('purge', this.sql.purge, [key, this.retentionMs])
  }

  /**
   * What in the database's settings breaks the durability the inbox promises: `fsync` off (a
   * power loss or OS crash can corrupt or lose committed rows) or `synchronous_commit` off (a
   * crash loses the last commits, deliveries the sender was told 202 about). One line each, empty
   * when none; one line saying they could not be checked when the database does not answer.
   *
   * @example
   * for (const line of await inbox.durabilityWarnings()) console.warn(line)
   */
  async durabilityWarnings(): Promise<string[]> {
    let settings: { fsync: string; synchronous_commit: string }
    try {
      settings = await this.first('durabilityWarnings', this.sql.settings, [])
    } catch (error) {
      return [`svc-webhooks: PostgresInbox could not check the database's fsync and synchronous_commit settings (${unchecked(error)}); make sure both are on.`]
    }
    const { fsync, synchronous_commit: sync } = settings
    const warnings: string[] = []
    if (fsync === 'off') {
      warnings.push('svc-webhooks: PostgresInbox: the database runs with fsync off: a power loss or OS crash can lose or corrupt committed deliveries the sender was told 202 about. Turn fsync on.')
    }
    if (sync === 'off') {
      warnings.push('svc-webhooks: PostgresInbox: synchronous_commit is off: a database crash loses the last commits, deliveries the sender was told 202 about. Set synchronous_commit to on (or local).')
    }
    try {
      // Once per line: synchronous_commit off is said above already.
      const standby = standbyWarnings(await this.first('durabilityWarnings', STANDBY_SETTINGS, []), 'PostgresInbox')
      warnings.push(...standby.filter((line) => !(sync === 'off' && line.includes('synchronous_commit is off'))))
    } catch (error) {
      warnings.push(`svc-webhooks: PostgresInbox could not check the database's standbys (${unchecked(error)}).`)
    }
    return warnings
  }

  async stats(): Promise<InboxStats> {
    const row = await this.first<{ depth: number; oldest_age_ms: number; retrying: number; dead: number; paused: boolean | null; paused_by: string | null; per_second: number | null }>('stats', this.sql.stats, [])
    const flow = { pause: { paused: row.paused === true, ...(row.paused_by !== null ? { by: row.paused_by } : {}) }, ...(row.per_second !== null ? { perSecond: Number(row.per_second) } : {}) }
    return { depth: row.depth, oldestAgeMs: Math.round(row.oldest_age_ms), retrying: row.retrying, dead: row.dead, ...flowStats(flow) }
  }

  /** Runs one operation within the deadline, its failure an InboxError. */
  private run<T>(what: string, attempt: () => Promise<T>, onLate?: (late: T) => void, deadline?: number): Promise<T> {
    return inboxDeadline(`PostgresInbox.${what}`, budget(this.timeoutMs, deadline), attempt, { refused: isPostgresRefusal, ...(onLate ? { onLate } : {}) })
  }

  /** The first row of a statement that always returns one. */
  private async first<T>(what: string, text: string, values: unknown[]): Promise<T> {
    const { rows } = await this.run(what, () => this.statements.query(this.pool, text, values))
    if (rows[0] === undefined) throw new InboxError('refused', `PostgresInbox.${what}`, `svc-webhooks: PostgresInbox.${what} got no row from the database.`)
    return rows[0] as T
  }

  /** A statement whose row says whether the operation took effect (`done`). */
  private async done(what: string, text: string, values: unknown[]): Promise<boolean> {
    return (await this.first<{ done: boolean }>(what, text, values)).done === true
  }

  /** Runs `work` between BEGIN and COMMIT (or ROLLBACK when it says so) on one connection. */
  private async transaction<T>(work: (db: PostgresQueryable) => Promise<{ result: T; commit: boolean }>): Promise<T> {
    const connection = await this.pool.connect()
    try {
      await connection.query('BEGIN')
      const { result, commit } = await work(connection)
      await connection.query(commit ? 'COMMIT' : 'ROLLBACK')
      connection.release()
      return result
    } catch (error) {
      // A connection that cannot even roll back is not handed back to the pool.
      const broken = await connection.query('ROLLBACK').then(
        () => false,
        () => true,
      )
      connection.release(broken)
      throw error
    }
  }
}

/** A taken row as an entry. */
function entryOf(row: Row): InboxEntry {
  return {
    ...delivery(row),
    attempts: row.attempts,
    takes: row.takes,
    retriesSince: Math.round(row.retries_since_ms),
    lease: row.lease!,
    ...(row.last_error !== null ? { lastError: row.last_error } : {}),
  }
}

function isAccepted(result: { rows: unknown[] }): boolean {
  return (result.rows[0] as { accepted?: unknown } | undefined)?.accepted === true
}
