/**
 * The SQL of `PostgresInbox`: the tables (with the upgrade of a table made by an earlier version)
 * and one statement per operation (src/inbox/postgres.ts says why the tables look as they do).
 * Every clock reading is the database's `now()`.
 */
import { quoteTable } from '../clients/postgres.js'
import { completeSql, createOrderingSql, entryColumns, flowColumns, sweepOrderCte } from './postgres-order-sql.js'

export const DEFAULT_TABLE = 'svc_webhooks_inbox'
/** Room for the longest derived name, `<table>_keys_processed`, within Postgres's 63 bytes. */
const MAX_TABLE_NAME = 48

/** The quoted names of an inbox's two tables. */
export interface Names {
  deliveries: string
  keys: string
  /** The unqualified table name, for index names (an index lives in its table's schema). */
  base: string
  /** The table name as given (schema-qualified or not). */
  table: string
}

/**
 * The names of `table`'s two tables, quoted; a TypeError for a name that is not a plain
 * identifier or is too long.
 *
 * @example
 * names('webhooks.inbox').keys // '"webhooks"."inbox_keys"'
 */
export function names(table: unknown): Names {
  const deliveries = quoteTable(table, 'PostgresInbox')
  const base = (table as string).split('.').pop()!
  if (base.length > MAX_TABLE_NAME) {
    // Postgres would silently cut `<table>_keys` to 63 bytes, and it could become `<table>` itself.
    throw new TypeError(`svc-webhooks: PostgresInbox \`table\` must be at most ${MAX_TABLE_NAME} characters (after the schema), so that \`<table>_keys\` and its index names fit Postgres's 63.`)
  }
  return { deliveries, keys: quoteTable(`${table as string}_keys`, 'PostgresInbox'), base, table: table as string }
}

/**
 * `ALTER TABLE table changes` only when `table` lacks `column` (the last one the change adds):
 * ALTER TABLE takes an ACCESS EXCLUSIVE lock even when every column exists, which would queue
 * every take behind it each time a process starts and calls ensureTable().
 */
function upgrade(table: string, column: string, changes: string): string {
  // `table` is quoted from checked identifiers (letters, digits, underscores): it holds no quote.
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${table}'::regclass AND attname = '${column}' AND NOT attisdropped) THEN
    ALTER TABLE ${table} ${changes};
  END IF;
END $$;`
}

/**
 * The statements that create the inbox's two tables and their indexes, for your migrations. They
 * also upgrade tables created by an earlier version (adding the columns they lack, and touching
 * nothing when none is missing), so running them again is how a deployment moves to this one.
 *
 * @example
 * await pool.query(createInboxTableSql('webhooks.inbox'))
 */
export function createInboxTableSql(table = DEFAULT_TABLE): string {
  const { deliveries: d, keys: k, base } = names(table)
  // takes: hand-outs counted at take; retries_since: where the retry budget counts from (null:
  // received_at); acked_lease: the lease of the last retry or bury, so a repeat answers true;
  // completed_by: the lease that completed the delivery, for the same reason; traceparent: the
  // receive span's trace context (telemetry), so the worker's span joins its trace.
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
  dead_at timestamptz,
  takes integer NOT NULL DEFAULT 0,
  retries_since timestamptz,
  acked_lease text,
  traceparent text
);
${upgrade(d, 'traceparent', `ADD COLUMN IF NOT EXISTS takes integer NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS retries_since timestamptz,
  ADD COLUMN IF NOT EXISTS acked_lease text,
  ADD COLUMN IF NOT EXISTS traceparent text`)}
CREATE INDEX IF NOT EXISTS "${base}_visible" ON ${d} (visible_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS "${base}_received" ON ${d} (received_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS "${base}_retrying" ON ${d} (visible_at) WHERE state = 'queued' AND attempts > 0;
CREATE INDEX IF NOT EXISTS "${base}_dead" ON ${d} (dead_at) WHERE state = 'dead';
CREATE TABLE IF NOT EXISTS ${k} (
  key text PRIMARY KEY,
  delivery text NOT NULL,
  processed_until timestamptz,
  completed_by text
);
${upgrade(k, 'completed_by', 'ADD COLUMN IF NOT EXISTS completed_by text')}
CREATE INDEX IF NOT EXISTS "${base}_keys_processed" ON ${k} (processed_until) WHERE processed_until IS NOT NULL;
${createOrderingSql(table)}`
}

/** The columns a taken entry or a dead letter is read with, from the deliveries table as `alias`. */
function columns(alias: string): string {
  return entryColumns(alias, { dead: true })
}

const ms = (param: string) => `interval '1 millisecond' * ${param}::float8`

/** The statements of one inbox, by operation. */
export type Statements = Record<
  'append' | 'appendFiled' | 'take' | 'handBack' | 'complete' | 'retry' | 'bury' | 'extend' | 'dead' | 'requeue' | 'purge' | 'stats' | 'sweep' | 'settings',
  string
>

/**
 * Every statement of an inbox on `table`.
 *
 * @example
 * const sql = statements(names('svc_webhooks_inbox'))
 * await pool.query(sql.take, [10, 60_000])
 */
export function statements({ deliveries: d, keys: k, table }: Names): Statements {
  // $1 is the primary key and $2 the lease in every statement that uses it.
  const held = `lease = $2 AND state = 'queued' AND visible_at > now()`
  // Where the inbox's `ordering` files the delivery ($11 key, $12 order): columns of this version,
  // so an inbox without `ordering` appends without them, to a table not upgraded yet too.
  const append = (filed: boolean) => `WITH wanted AS (SELECT DISTINCT unnest($2::text[]) AS key),
claimed AS (
  INSERT INTO ${k} AS held (key, delivery) SELECT key, $1 FROM wanted ORDER BY key
  ON CONFLICT (key) DO UPDATE SET delivery = EXCLUDED.delivery, processed_until = NULL, completed_by = NULL
  WHERE held.processed_until <= now()
  RETURNING 1
),
added AS (
  INSERT INTO ${d} (key, keys, endpoint, id, signed_timestamp, signature_version, secret_index, body, received_at, visible_at, traceparent${filed ? ', filed_key, filed_at' : ''})
  SELECT $1, $2::text[], $3, $4, $5::bigint, $6, $7::integer, $8::bytea, to_timestamp($9::float8 / 1000), now(), $10${filed ? ', $11, $12' : ''}
  WHERE (SELECT count(*) FROM claimed) = (SELECT count(*) FROM wanted)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM added) AS accepted`
  return {
    // $1 first key, $2 all keys, $3.. the delivery. Accepted only when every distinct key was
    // inserted or taken over from an expired processed key (see postgres.ts for why the keys
    // table's ON CONFLICT is the check). With one key the statement is all or nothing by
    // itself; with several, append() wraps it in a transaction and rolls back a partial claim.
    append: append(false),
    appendFiled: append(true),
    // SKIP LOCKED: a row another worker is leasing right now is passed over, not waited for.
    // A row leased and committed after this statement's snapshot is re-checked on its newest
    // version by FOR UPDATE, where visible_at is in the future: it is not taken twice. The take
    // is counted in the same statement as the lease, so a holder that dies is counted too.
    take: `WITH due AS (
  SELECT key FROM ${d} WHERE state = 'queued' AND visible_at <= now()
  ORDER BY visible_at LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE ${d} AS d SET lease = gen_random_uuid()::text, visible_at = now() + ${ms('$2')}, takes = d.takes + 1
FROM due WHERE d.key = due.key
RETURNING ${columns('d')}`,
    // Leases a take got after its caller stopped waiting, given up so the rows are due now, and
    // the take uncounted: no handler ran.
    handBack: `UPDATE ${d} AS d SET lease = NULL, visible_at = now(), takes = GREATEST(d.takes - 1, 0)
FROM unnest($1::text[], $2::text[]) AS late (key, lease)
WHERE d.key = late.key AND d.lease = late.lease AND d.state = 'queued' AND d.visible_at > now()`,
    // $1 primary key, $2 lease, $3 retention ms; a repeat by the same lease answers true (completeSql says how).
    complete: completeSql(table, '$1', '$2', '$3'),
    // As for complete: acked_lease makes a repeat by the same lease answer true.
    retry: `WITH done AS (
  UPDATE ${d} SET attempts = attempts + 1, last_error = $3, lease = NULL, acked_lease = $2, visible_at = now() + ${ms('$4')}
  WHERE key = $1 AND ${held} RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done) OR EXISTS (SELECT 1 FROM ${d} WHERE key = $1 AND acked_lease = $2 AND state = 'queued') AS done`,
    bury: `WITH done AS (
  UPDATE ${d} SET state = 'dead', attempts = attempts + 1, last_error = $3, lease = NULL, acked_lease = $2, dead_at = now()
  WHERE key = $1 AND ${held} RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done) OR EXISTS (SELECT 1 FROM ${d} WHERE key = $1 AND acked_lease = $2 AND state = 'dead') AS done`,
    extend: `WITH done AS (
  UPDATE ${d} SET visible_at = now() + ${ms('$3')} WHERE key = $1 AND ${held} RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done) AS done`,
    dead: `SELECT ${columns('d')} FROM ${d} AS d WHERE state = 'dead' ORDER BY dead_at, key LIMIT $1`,
    // A full retry budget: attempts and takes back to 0, retries counted from now. The keys
    // stay held while the delivery is dead, so they need no change here.
    requeue: `WITH done AS (
  UPDATE ${d} SET state = 'queued', attempts = 0, takes = 0, retries_since = now(), last_error = NULL, lease = NULL,
    acked_lease = NULL, dead_at = NULL, visible_at = now()
  WHERE key = $1 AND state = 'dead' RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done) AS done`,
    // $1 primary key, $2 retention: the row goes, its keys stay processed for the retention
    // window (a resend is answered duplicate), then sweep() deletes them.
    purge: `WITH gone AS (
  DELETE FROM ${d} WHERE key = $1 AND state = 'dead' RETURNING keys
),
processed AS (
  UPDATE ${k} AS k SET processed_until = now() + ${ms('$2')}
  FROM gone WHERE k.key = ANY (gone.keys) AND k.delivery = $1
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM gone) AS done`,
    // received_at is the receiver's clock and now() the database's: the age is as good as their agreement.
    stats: `SELECT
  (SELECT count(*) FROM ${d} WHERE state = 'queued')::int AS depth,
  COALESCE((SELECT GREATEST(0, extract(epoch FROM now() - min(received_at)) * 1000) FROM ${d} WHERE state = 'queued'), 0)::float8 AS oldest_age_ms,
  (SELECT count(*) FROM ${d} WHERE state = 'queued' AND attempts > 0)::int AS retrying,
  (SELECT count(*) FROM ${d} WHERE state = 'dead')::int AS dead,
  ${flowColumns(table)}`,
    // The outer test is not redundant: a DELETE that waited on a key an append has just taken
    // over re-checks only its own WHERE on the newest row version (READ COMMITTED), where
    // processed_until is null; the sub-select alone, read from the older snapshot, would
    // delete the new delivery's key.
    // $2 the retention: ordering's per-key records idle that long go in the same statement.
    sweep: `WITH ${sweepOrderCte(table)},
gone AS (
  DELETE FROM ${k} WHERE key IN (SELECT key FROM ${k} WHERE processed_until < now() LIMIT $1) AND processed_until < now() RETURNING 1
)
SELECT count(*)::int AS n FROM gone`,
    settings: `SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS synchronous_commit`,
  }
}
