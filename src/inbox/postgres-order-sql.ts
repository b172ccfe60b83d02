/**
 * The SQL of PostgresInbox's ordering and flow control (DESIGN.md "Order within a conversation",
 * "Flow control"; the contract is src/contracts/ordering.ts), beside the inbox's own statements
 * in postgres-sql.ts. What it adds, and why:
 *
 * - Columns on the deliveries table: `order_key`, `order_at` (fixed-width order text) and
 *   `order_strict`, set when a worker places the delivery; `placing_until`, the end of a placing
 *   lease. An unplaced delivery has no `order_key`.
 * - The head of a key is computed, not stored: `DISTINCT ON (order_key) ... ORDER BY order_key,
 *   order_at` over queued, placed rows (an index on exactly that). A key is busy while one of its
 *   rows is leased (`lease IS NOT NULL AND visible_at > now()`): retry and hand-back clear the
 *   lease, complete deletes the row, bury marks it dead, and an expired lease is just time, so
 *   the inbox's own statements keep this true without knowing about keys.
 * - Ordered takes of one inbox are serialized by a transaction-level advisory lock: the head is
 *   read and leased in one statement while no other ordered take can lease a row of the same key.
 *   Completes, retries and appends do not take the lock (they only ever make a key less busy, or
 *   add a delivery that the next take sees).
 * - `<table>_order`: per key, the highest order completed (`last`), kept by a trigger on the
 *   deliveries table's DELETE of a queued row (only complete deletes one), so a late delivery is
 *   known without the shared complete statement changing.
 * - `<table>_flow`: one row: the pause flag with its `version` (written only if unchanged), and
 *   the token bucket (`tokens`, `refilled_at`, `per_second`), all updated by single statements
 *   that lock the row, so every worker shares one rate.
 */
import { quoteTable } from '../clients/postgres.js'

/** The quoted names of what ordering adds to an inbox on `table`. */
export interface OrderNames {
  deliveries: string
  order: string
  flow: string
  trigger: string
  base: string
}

export function orderNames(table: string): OrderNames {
  return {
    deliveries: quoteTable(table, 'PostgresInbox'),
    order: quoteTable(`${table}_order`, 'PostgresInbox'),
    flow: quoteTable(`${table}_flow`, 'PostgresInbox'),
    trigger: quoteTable(`${table}_order_done`, 'PostgresInbox'),
    base: table.split('.').pop()!,
  }
}

/** The statements that add ordering and flow control to an inbox's tables (idempotent). */
export function createOrderingSql(table: string): string {
  const { deliveries: d, order: o, flow: f, trigger: t, base } = orderNames(table)
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${d}'::regclass AND attname = 'placing_until' AND NOT attisdropped) THEN
    ALTER TABLE ${d} ADD COLUMN IF NOT EXISTS order_key text, ADD COLUMN IF NOT EXISTS order_at text,
      ADD COLUMN IF NOT EXISTS order_strict boolean, ADD COLUMN IF NOT EXISTS placing_until timestamptz;
  END IF;
END $$;
CREATE INDEX IF NOT EXISTS "${base}_order_heads" ON ${d} (order_key, order_at, key) WHERE state = 'queued' AND order_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS "${base}_unplaced" ON ${d} (visible_at) WHERE state = 'queued' AND order_key IS NULL;
CREATE TABLE IF NOT EXISTS ${o} (
  order_key text PRIMARY KEY,
  last text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ${f} (
  id integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  paused boolean NOT NULL DEFAULT false,
  paused_by text,
  paused_since timestamptz,
  version bigint NOT NULL DEFAULT 0,
  tokens float8,
  refilled_at timestamptz,
  per_second float8,
  last_granted integer NOT NULL DEFAULT 0
);
INSERT INTO ${f} (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION ${t}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.order_key IS NOT NULL AND OLD.state = 'queued' THEN
    INSERT INTO ${o} AS o (order_key, last) VALUES (OLD.order_key, OLD.order_at)
    ON CONFLICT (order_key) DO UPDATE SET last = GREATEST(o.last, EXCLUDED.last), updated_at = now();
  END IF;
  RETURN NULL;
END $fn$;
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '${d}'::regclass AND tgname = '${base}_order_done') THEN
    CREATE TRIGGER "${base}_order_done" AFTER DELETE ON ${d} FOR EACH ROW EXECUTE FUNCTION ${t}();
  END IF;
END $$;`
}

/** The flow state as stats columns (`paused`, `paused_by`, `per_second`), for the inbox's stats statement. */
export function flowColumns(table: string): string {
  const { flow: f } = orderNames(table)
  return `(SELECT paused FROM ${f} WHERE id = 1) AS paused, (SELECT paused_by FROM ${f} WHERE id = 1) AS paused_by, (SELECT per_second FROM ${f} WHERE id = 1) AS per_second`
}

/**
 * A CTE for the inbox's sweep statement ($1 limit, $2 retention ms): deletes the last-order
 * records of keys untouched for the retention and with no delivery queued (a late one is told by it).
 */
export function sweepOrderCte(table: string): string {
  const { deliveries: d, order: o } = orderNames(table)
  return `order_gone AS (
  DELETE FROM ${o} AS o WHERE o.order_key IN (
    SELECT order_key FROM ${o} WHERE updated_at < now() - ${ms('$2')} LIMIT $1
  ) AND o.updated_at < now() - ${ms('$2')}
    AND NOT EXISTS (SELECT 1 FROM ${d} WHERE order_key = o.order_key AND state = 'queued')
)`
}

const ms = (param: string) => `interval '1 millisecond' * ${param}::float8`

/**
 * The columns an entry is read with, from the deliveries table as `alias`: by postgres-sql.ts
 * (a taken entry or a dead letter) and by the ordered takes here, so both read the same row.
 * `dead` says whether the entry may be a dead letter; one that cannot reads `dead_ms` as NULL.
 */
export function entryColumns(alias: string, { dead }: { dead: boolean }): string {
  const c = (column: string) => `${alias}.${column}`
  const epochMs = (value: string) => `(extract(epoch FROM ${value}) * 1000)::float8`
  return [
    c('keys'),
    c('endpoint'),
    c('id'),
    `${c('signed_timestamp')}::float8 AS signed_timestamp`,
    c('signature_version'),
    c('secret_index'),
    c('body'),
    `${epochMs(c('received_at'))} AS received_ms`,
    c('attempts'),
    c('takes'),
    `${epochMs(`COALESCE(${c('retries_since')}, ${c('received_at')})`)} AS retries_since_ms`,
    c('last_error'),
    c('lease'),
    dead ? `${epochMs(c('dead_at'))} AS dead_ms` : `NULL::float8 AS dead_ms`,
    c('traceparent'),
  ].join(', ')
}

/** The columns a taken entry is read with: postgres-sql.ts's, and its order. */
function columns(alias: string): string {
  return `${entryColumns(alias, { dead: false })}, ${alias}.order_key, ${alias}.order_at`
}

export type OrderStatements = Record<'lock' | 'take' | 'place' | 'admit' | 'read' | 'refund' | 'setPause', string>

export function orderStatements(table: string): OrderStatements {
  const { deliveries: d, order: o, flow: f } = orderNames(table)
  const avail = `LEAST($3::float8, COALESCE(t.tokens + GREATEST(0, extract(epoch FROM now() - t.refilled_at)) * $2::float8, $3::float8))`
  const granted = `GREATEST(0, LEAST($1::float8, floor(${avail})))`
  const pause = `t.paused, t.paused_by, COALESCE((extract(epoch FROM t.paused_since) * 1000)::float8, 0) AS since_ms, t.version`
  return {
    // One lock per inbox, held until the take's transaction ends. The name is a checked identifier
    // (letters, digits, underscores, one dot): it holds no quote.
    lock: `SELECT pg_advisory_xact_lock(hashtext('${table}')) AS locked`,
    // $1 placing batch, $2 placing lease ms, $3 max heads, $4 visibility ms. One statement, run
    // under the lock: unplaced due rows are leased to be placed (kind 'place'); only when there
    // are none and none is being placed are heads leased (kind 'run'): for each key nobody runs,
    // the lowest order (strict: due or not, so a retrying head holds its key; otherwise the lowest
    // that is due), oldest first. A row of kind 'busy' says another worker is placing.
    take: `WITH due AS (
  SELECT key FROM ${d} WHERE state = 'queued' AND order_key IS NULL AND visible_at <= now()
  ORDER BY visible_at LIMIT $1
  FOR UPDATE SKIP LOCKED
),
to_place AS (
  UPDATE ${d} AS d SET lease = gen_random_uuid()::text, visible_at = now() + ${ms('$2')}, placing_until = now() + ${ms('$2')}
  FROM due WHERE d.key = due.key
  RETURNING ${columns('d')}
),
placers AS (
  SELECT 1 FROM ${d} WHERE state = 'queued' AND order_key IS NULL AND placing_until > now() AND visible_at > now() LIMIT 1
),
busy AS (
  SELECT DISTINCT order_key FROM ${d} WHERE state = 'queued' AND order_key IS NOT NULL AND lease IS NOT NULL AND visible_at > now()
),
candidates AS (
  SELECT DISTINCT ON (order_key) key, order_key, order_at, visible_at FROM ${d}
  WHERE state = 'queued' AND order_key IS NOT NULL AND (order_strict OR visible_at <= now())
    AND order_key NOT IN (SELECT order_key FROM busy)
  ORDER BY order_key, order_at, key
),
chosen AS (
  SELECT key FROM candidates
  WHERE visible_at <= now() AND NOT EXISTS (SELECT 1 FROM due) AND NOT EXISTS (SELECT 1 FROM placers)
  ORDER BY order_at LIMIT $3
),
leased AS (
  UPDATE ${d} AS d SET lease = gen_random_uuid()::text, visible_at = now() + ${ms('$4')}, takes = d.takes + 1
  FROM chosen WHERE d.key = chosen.key
  RETURNING ${columns('d')}
)
SELECT 'place' AS kind, to_place.*, false AS late FROM to_place
UNION ALL
SELECT 'run', leased.*, (o.last IS NOT NULL AND leased.order_at < o.last) FROM leased LEFT JOIN ${o} AS o ON o.order_key = leased.order_key
UNION ALL
SELECT 'busy', ${Array.from({ length: 17 }, () => 'NULL').join(', ')}, false WHERE NOT EXISTS (SELECT 1 FROM due) AND EXISTS (SELECT 1 FROM placers)`,
    // $1 keys, $2 leases, $3 order keys, $4 orders, $5 strict. The placing lease must still be held.
    place: `UPDATE ${d} AS d SET order_key = p.order_key, order_at = p.order_at, order_strict = p.strict, lease = NULL, visible_at = now(), placing_until = NULL
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[]) AS p (key, lease, order_key, order_at, strict)
WHERE d.key = p.key AND d.lease = p.lease AND d.state = 'queued' AND d.visible_at > now() AND d.order_key IS NULL
RETURNING d.key`,
    // $1 want, $2 perSecond, $3 burst. Every SET reads the row as it was (locked by this UPDATE),
    // so two workers admitted at once never share a token.
    admit: `UPDATE ${f} AS t SET
  last_granted = CASE WHEN t.paused THEN 0 ELSE ${granted} END,
  tokens = CASE WHEN t.paused THEN t.tokens ELSE ${avail} - ${granted} END,
  refilled_at = CASE WHEN t.paused THEN t.refilled_at ELSE now() END,
  per_second = $2::float8
WHERE t.id = 1
RETURNING ${pause}, t.last_granted AS granted, t.tokens`,
    read: `SELECT ${pause}, t.per_second FROM ${f} AS t WHERE t.id = 1`,

    // $1 tokens, $2 burst.
    refund: `UPDATE ${f} SET tokens = LEAST($2::float8, tokens + $1::float8) WHERE id = 1 AND tokens IS NOT NULL`,
    // $1 paused, $2 by, $3 expected version (null: any). A conditional write: no row when it moved.
    setPause: `UPDATE ${f} AS t SET paused = $1::boolean, paused_by = CASE WHEN $1::boolean THEN $2 END,
  paused_since = CASE WHEN $1::boolean THEN now() END, version = t.version + 1
WHERE t.id = 1 AND ($3::bigint IS NULL OR t.version = $3::bigint)
RETURNING ${pause}`,
  }
}
