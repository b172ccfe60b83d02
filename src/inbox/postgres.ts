/**
 * `PostgresInbox` (`svc-webhooks/postgres`): the durable inbox on a Postgres the receiver
 * already runs (DESIGN.md "Durable inbox"). Two tables, every clock reading is the database's
 * `now()`, and every operation is one statement, except an append with several keys, which is
 * one transaction.
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
 */
import { quoteTable, type PostgresQueryable } from '../stores/postgres-client.js'
import { positiveOption, withDeadline } from '../stores/deadline.js'
import {
  DEFAULT_INBOX_RETENTION_MS,
  type AppendResult,
  type DeadLetter,
  type InboxDelivery,
  type InboxEntry,
  type InboxStats,
  type WebhookInbox,
} from './inbox.js'

/** A connection checked out of a pool (a `pg` `PoolClient`). */
interface PostgresConnection extends PostgresQueryable {
  release(destroy?: Error | boolean): void
}

/** The part of a `pg` `Pool` the inbox uses: statements, and a connection for a transaction. */
interface PostgresPool extends PostgresQueryable {
  connect(): Promise<PostgresConnection>
}

/** Options of {@link PostgresInbox}: give `pool` (recommended) or `client`. */
export interface PostgresInboxOptions {
  /** A `pg` Pool. Attach `pool.on('error', ...)`: an idle connection dropped by a restart emits one. */
  pool?: PostgresPool
  /**
   * A connected `pg` Client, when you do not use a pool. The inbox then runs one operation at a
   * time on it, so no statement lands inside another operation's transaction.
   */
  client?: PostgresQueryable
  /**
   * The deliveries table, optionally schema-qualified (`schema.table`); the keys table is
   * `<table>_keys`. Create both with `ensureTable()` or the statements from
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

const DEFAULT_TABLE = 'svc_webhooks_inbox'
/** Room for the longest derived name, `<table>_keys_processed`, within Postgres's 63 bytes. */
const MAX_TABLE_NAME = 48

interface Names {
  deliveries: string
  keys: string
  /** The unqualified table name, for index names (an index lives in its table's schema). */
  base: string
}

function names(table: unknown): Names {
  const deliveries = quoteTable(table, 'PostgresInbox')
  const base = (table as string).split('.').pop()!
  if (base.length > MAX_TABLE_NAME) {
    // Postgres would silently cut `<table>_keys` to 63 bytes, and it could become `<table>` itself.
    throw new TypeError(`svc-webhooks: PostgresInbox \`table\` must be at most ${MAX_TABLE_NAME} characters (after the schema), so that \`<table>_keys\` and its index names fit Postgres's 63.`)
  }
  return { deliveries, keys: quoteTable(`${table as string}_keys`, 'PostgresInbox'), base }
}

/**
 * The statements that create the inbox's two tables and their indexes, for your migrations.
 *
 * @example
 * await pool.query(createInboxTableSql('webhooks.inbox'))
 */
export function createInboxTableSql(table = DEFAULT_TABLE): string {
  const { deliveries: d, keys: k, base } = names(table)
  return `CREATE TABLE IF NOT EXISTS ${d} (
  key text PRIMARY KEY,
  keys text[] NOT NULL,
  endpoint text NOT NULL,
  id text NOT NULL,
  signed_timestamp bigint NOT NULL,
  signature_version text NOT NULL,
  secret_index integer NOT NULL,
  body bytea NOT NULL,
  received_at timestamptz NOT NULL,
  state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'dead')),
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  visible_at timestamptz NOT NULL,
  lease text,
  dead_at timestamptz
);
CREATE INDEX IF NOT EXISTS "${base}_visible" ON ${d} (visible_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS "${base}_received" ON ${d} (received_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS "${base}_retrying" ON ${d} (visible_at) WHERE state = 'queued' AND attempts > 0;
CREATE INDEX IF NOT EXISTS "${base}_dead" ON ${d} (dead_at) WHERE state = 'dead';
CREATE TABLE IF NOT EXISTS ${k} (
  key text PRIMARY KEY,
  delivery text NOT NULL,
  processed_until timestamptz
);
CREATE INDEX IF NOT EXISTS "${base}_keys_processed" ON ${k} (processed_until) WHERE processed_until IS NOT NULL;`
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
  last_error: string | null
  lease: string | null
  dead_ms: number | null
}

function columns(alias: string): string {
  const c = (column: string) => `${alias}.${column}`
  return [
    c('keys'),
    c('endpoint'),
    c('id'),
    `${c('signed_timestamp')}::float8 AS signed_timestamp`,
    c('signature_version'),
    c('secret_index'),
    c('body'),
    `(extract(epoch FROM ${c('received_at')}) * 1000)::float8 AS received_ms`,
    c('attempts'),
    c('last_error'),
    c('lease'),
    `(extract(epoch FROM ${c('dead_at')}) * 1000)::float8 AS dead_ms`,
  ].join(', ')
}

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
  }
}

const ms = (param: string) => `interval '1 millisecond' * ${param}::float8`

/**
 * A durable inbox on Postgres. Accepted deliveries survive a restart of the receiver, the
 * workers and the database (as far as its `fsync` and `synchronous_commit` make commits
 * durable). Processed keys stay until `sweep()` deletes them once their retention has passed:
 * run it from a cron job or a timer.
 *
 * @example
 * import pg from 'pg'
 * import { createInboxWorker } from 'svc-webhooks'
 * import { PostgresInbox } from 'svc-webhooks/postgres'
 * const inbox = new PostgresInbox({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) })
 * await inbox.ensureTable()
 * app.post('/webhooks/svc', webhooks({ secret, inbox }))
 * createInboxWorker({ inbox, on: { 'message.received': save } }).start()
 * setInterval(() => inbox.sweep().catch(console.error), 60_000).unref()
 */
export class PostgresInbox implements WebhookInbox {
  readonly table: string
  readonly retentionMs: number
  readonly timeoutMs: number
  private readonly pool: PostgresPool | undefined
  private readonly client: PostgresQueryable | undefined
  /** With a single client: the operation running on it, so the next waits its turn. */
  private tail: Promise<unknown> = Promise.resolve()
  private readonly sql: Record<'append' | 'take' | 'handBack' | 'complete' | 'retry' | 'bury' | 'extend' | 'dead' | 'requeue' | 'stats' | 'sweep', string>

  constructor({ pool, client, table = DEFAULT_TABLE, retentionMs = DEFAULT_INBOX_RETENTION_MS, timeoutMs = 2000 }: PostgresInboxOptions) {
    if (pool !== undefined) {
      if (typeof pool?.query !== 'function' || typeof pool.connect !== 'function') {
        throw new TypeError('svc-webhooks: PostgresInbox `pool` must be a pg Pool (new pg.Pool(...)): it needs query() and connect().')
      }
    } else if (typeof client?.query !== 'function') {
      throw new TypeError('svc-webhooks: PostgresInbox needs `pool` (new pg.Pool(...)) or a connected `client`.')
    } else if ('totalCount' in client && typeof (client as Partial<PostgresPool>).connect === 'function') {
      // A pool's statements go to any of its connections: BEGIN, the append and ROLLBACK would
      // not share one, and a rolled-back partial claim would stay.
      throw new TypeError('svc-webhooks: PostgresInbox `client` is a pg Pool: pass it as `pool`.')
    }
    positiveOption(retentionMs, 'PostgresInbox `retentionMs`')
    positiveOption(timeoutMs, 'PostgresInbox `timeoutMs`')
    const { deliveries: d, keys: k } = names(table)
    this.pool = pool
    this.client = pool === undefined ? client : undefined
    this.table = table
    this.retentionMs = retentionMs
    this.timeoutMs = timeoutMs
    const held = `lease = $2 AND state = 'queued' AND visible_at > now()`
    this.sql = {
      // $1 first key, $2 all keys, $3.. the delivery. Accepted only when every distinct key was
      // inserted or taken over from an expired processed key (see the header for why the keys
      // table's ON CONFLICT is the check). With one key the statement is all or nothing by
      // itself; with several, append() wraps it in a transaction and rolls back a partial claim.
      append: `WITH wanted AS (SELECT DISTINCT unnest($2::text[]) AS key),
claimed AS (
  INSERT INTO ${k} AS held (key, delivery) SELECT key, $1 FROM wanted ORDER BY key
  ON CONFLICT (key) DO UPDATE SET delivery = EXCLUDED.delivery, processed_until = NULL
  WHERE held.processed_until <= now()
  RETURNING 1
),
added AS (
  INSERT INTO ${d} (key, keys, endpoint, id, signed_timestamp, signature_version, secret_index, body, received_at, visible_at)
  SELECT $1, $2::text[], $3, $4, $5::bigint, $6, $7::integer, $8::bytea, to_timestamp($9::float8 / 1000), now()
  WHERE (SELECT count(*) FROM claimed) = (SELECT count(*) FROM wanted)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM added) AS accepted`,
      // SKIP LOCKED: a row another worker is leasing right now is passed over, not waited for.
      // A row leased and committed after this statement's snapshot is re-checked on its newest
      // version by FOR UPDATE, where visible_at is in the future: it is not taken twice.
      take: `WITH due AS (
  SELECT key FROM ${d} WHERE state = 'queued' AND visible_at <= now()
  ORDER BY visible_at LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE ${d} AS d SET lease = gen_random_uuid()::text, visible_at = now() + ${ms('$2')}
FROM due WHERE d.key = due.key
RETURNING ${columns('d')}`,
      // Leases a take got after its caller stopped waiting, given up so the rows are due now.
      handBack: `UPDATE ${d} AS d SET lease = NULL, visible_at = now()
FROM unnest($1::text[], $2::text[]) AS late (key, lease)
WHERE d.key = late.key AND d.lease = late.lease AND d.state = 'queued' AND d.visible_at > now()`,
      // Data-modifying CTEs always run to completion: the keys are marked processed whenever the
      // delivery row was ours to delete.
      complete: `WITH done AS (
  DELETE FROM ${d} WHERE key = $1 AND ${held} RETURNING keys
),
processed AS (
  UPDATE ${k} AS k SET processed_until = now() + ${ms('$3')}
  FROM done WHERE k.key = ANY (done.keys) AND k.delivery = $1
  RETURNING 1
)
SELECT count(*)::int AS done FROM done`,
      retry: `UPDATE ${d} SET attempts = attempts + 1, last_error = $3, lease = NULL, visible_at = now() + ${ms('$4')}
WHERE key = $1 AND ${held} RETURNING 1`,
      bury: `UPDATE ${d} SET state = 'dead', attempts = attempts + 1, last_error = $3, lease = NULL, dead_at = now()
WHERE key = $1 AND ${held} RETURNING 1`,
      extend: `UPDATE ${d} SET visible_at = now() + ${ms('$3')} WHERE key = $1 AND ${held} RETURNING 1`,
      dead: `SELECT ${columns('d')} FROM ${d} AS d WHERE state = 'dead' ORDER BY dead_at, key LIMIT $1`,
      // The keys stay held while the delivery is dead, so they need no change here.
      requeue: `UPDATE ${d} SET state = 'queued', attempts = 0, last_error = NULL, lease = NULL, dead_at = NULL, visible_at = now()
WHERE key = $1 AND state = 'dead' RETURNING 1`,
      // received_at is the receiver's clock and now() the database's: the age is as good as their agreement.
      stats: `SELECT
  (SELECT count(*) FROM ${d} WHERE state = 'queued')::int AS depth,
  COALESCE((SELECT GREATEST(0, extract(epoch FROM now() - min(received_at)) * 1000) FROM ${d} WHERE state = 'queued'), 0)::float8 AS oldest_age_ms,
  (SELECT count(*) FROM ${d} WHERE state = 'queued' AND attempts > 0)::int AS retrying,
  (SELECT count(*) FROM ${d} WHERE state = 'dead')::int AS dead`,
      // The outer test is not redundant: a DELETE that waited on a key an append has just taken
      // over re-checks only its own WHERE on the newest row version (READ COMMITTED), where
      // processed_until is null; the sub-select alone, read from the older snapshot, would
      // delete the new delivery's key.
      sweep: `WITH gone AS (
  DELETE FROM ${k} WHERE key IN (SELECT key FROM ${k} WHERE processed_until < now() LIMIT $1) AND processed_until < now() RETURNING 1
)
SELECT count(*)::int AS n FROM gone`,
    }
  }

  /**
   * Creates the two tables and their indexes if they do not exist.
   *
   * @example
   * await new PostgresInbox({ pool }).ensureTable()
   */
  async ensureTable(): Promise<void> {
    await this.query(createInboxTableSql(this.table))
  }

  /**
   * Deletes up to `limit` processed keys whose retention has passed and says how many.
   *
   * @example
   * setInterval(() => inbox.sweep().catch(console.error), 60_000).unref()
   */
  async sweep(limit = 10_000): Promise<number> {
    const { rows } = await withDeadline('PostgresInbox.sweep', this.timeoutMs, () => this.query(this.sql.sweep, [limit]))
    return (rows[0] as { n: number }).n
  }

  async append(entry: InboxDelivery): Promise<AppendResult> {
    const keys = entry.keys
    if (!Array.isArray(keys) || keys.length === 0 || !keys.every((key) => typeof key === 'string')) {
      throw new TypeError('svc-webhooks: PostgresInbox.append needs a delivery with at least one key.')
    }
    const values = [keys[0], [...keys], entry.endpoint, entry.id, entry.timestamp, entry.signatureVersion, entry.secretIndex, entry.rawBody, entry.receivedAt]
    const single = new Set(keys).size === 1
    // A retried attempt after one that committed unseen finds its own keys and says duplicate,
    // and an append that lands after the deadline stays queued: either way the delivery is in
    // the inbox once, and the sender's next try is answered 200 duplicate.
    const accepted = await withDeadline('PostgresInbox.append', this.timeoutMs, () =>
      single
        ? this.query(this.sql.append, values).then(isAccepted)
        : this.transaction(async (db) => {
            const ok = isAccepted(await db.query(this.sql.append, values))
            return { result: ok, commit: ok }
          }),
    )
    return accepted ? 'accepted' : 'duplicate'
  }

  async take(max: number, visibilityMs: number): Promise<InboxEntry[]> {
    if (!(max >= 1)) return []
    const { rows } = await withDeadline(
      'PostgresInbox.take',
      this.timeoutMs,
      () => this.query(this.sql.take, [Math.floor(max), visibilityMs]),
      (late) => {
        // Nobody will run what a take leased after the deadline: without this the rows would
        // wait out the whole visibility timeout (a minute by default) before another take.
        const taken = late.rows as Row[]
        if (taken.length === 0) return
        const keys = taken.map((row) => row.keys[0])
        const leases = taken.map((row) => row.lease)
        withDeadline('PostgresInbox.take', this.timeoutMs, () => this.query(this.sql.handBack, [keys, leases])).catch(() => undefined)
      },
    )
    return (rows as Row[]).map((row) => ({
      ...delivery(row),
      attempts: row.attempts,
      takes: row.attempts + 1,
      retriesSince: delivery(row).receivedAt,
      lease: row.lease!,
      ...(row.last_error !== null ? { lastError: row.last_error } : {}),
    }))
  }

  async complete(entry: InboxEntry): Promise<boolean> {
    const { rows } = await withDeadline('PostgresInbox.complete', this.timeoutMs, () => this.query(this.sql.complete, [entry.keys[0], entry.lease, this.retentionMs]))
    return (rows[0] as { done: number }).done > 0
  }

  async retry(entry: InboxEntry, delayMs: number, error: string): Promise<boolean> {
    return this.changed('PostgresInbox.retry', this.sql.retry, [entry.keys[0], entry.lease, error, Math.max(0, delayMs)])
  }

  async bury(entry: InboxEntry, error: string): Promise<boolean> {
    return this.changed('PostgresInbox.bury', this.sql.bury, [entry.keys[0], entry.lease, error])
  }

  async extend(entry: InboxEntry, visibilityMs: number): Promise<boolean> {
    return this.changed('PostgresInbox.extend', this.sql.extend, [entry.keys[0], entry.lease, visibilityMs])
  }

  async dead(limit = 100): Promise<DeadLetter[]> {
    const { rows } = await withDeadline('PostgresInbox.dead', this.timeoutMs, () => this.query(this.sql.dead, [limit]))
    return (rows as Row[]).map((row) => ({ ...delivery(row), attempts: row.attempts, takes: row.attempts, lastError: row.last_error ?? '', deadAt: Math.round(row.dead_ms!) }))
  }

  async requeue(key: string): Promise<boolean> {
    return this.changed('PostgresInbox.requeue', this.sql.requeue, [key])
  }

  async purge(_key: string): Promise<boolean> {
    throw new Error('svc-webhooks: PostgresInbox.purge is not implemented yet.')
  }

  async stats(): Promise<InboxStats> {
    const { rows } = await withDeadline('PostgresInbox.stats', this.timeoutMs, () => this.query(this.sql.stats, []))
    const row = rows[0] as { depth: number; oldest_age_ms: number; retrying: number; dead: number }
    return { depth: row.depth, oldestAgeMs: Math.round(row.oldest_age_ms), retrying: row.retrying, dead: row.dead }
  }

  private async changed(what: string, text: string, values: unknown[]): Promise<boolean> {
    const { rows } = await withDeadline(what, this.timeoutMs, () => this.query(text, values))
    return rows.length > 0
  }

  private query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> {
    if (this.pool) return this.pool.query(text, values)
    return this.serial(() => this.client!.query(text, values))
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work)
    this.tail = run.then(
      () => undefined,
      () => undefined,
    )
    return run
  }

  /** Runs `work` between BEGIN and COMMIT (or ROLLBACK when it says so) on one connection. */
  private transaction<T>(work: (db: PostgresQueryable) => Promise<{ result: T; commit: boolean }>): Promise<T> {
    const inside = async (db: PostgresQueryable): Promise<{ result: T } | { error: unknown; broken: boolean }> => {
      try {
        await db.query('BEGIN')
        const { result, commit } = await work(db)
        await db.query(commit ? 'COMMIT' : 'ROLLBACK')
        return { result }
      } catch (error) {
        // A connection that cannot even roll back is not handed back to the pool.
        const broken = await db.query('ROLLBACK').then(
          () => false,
          () => true,
        )
        return { error, broken }
      }
    }
    const settle = (outcome: { result: T } | { error: unknown }): T => {
      if ('error' in outcome) throw outcome.error
      return outcome.result
    }
    if (!this.pool) return this.serial(() => inside(this.client!)).then(settle)
    return this.pool.connect().then(async (connection) => {
      const outcome = await inside(connection)
      connection.release('broken' in outcome && outcome.broken)
      return settle(outcome)
    })
  }
}

function isAccepted(result: { rows: unknown[] }): boolean {
  return (result.rows[0] as { accepted?: unknown } | undefined)?.accepted === true
}
