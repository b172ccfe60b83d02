/**
 * The SQL of PostgresInbox's ordering and flow control (DESIGN.md "Order within a conversation",
 * "Flow control"; the contract is src/contracts/ordering.ts), beside the inbox's own statements
 * in postgres-sql.ts. What it adds, and why:
 *
 * - Columns on the deliveries table: `order_key`, `order_at` (fixed-width order text) and
 *   `order_strict`, set when a worker places the delivery; `placing_until`, the end of a placing
 *   lease. An unplaced delivery has no `order_key`.
 * - Filing: an inbox given `ordering` appends each delivery with `filed_key` and `filed_at` (its
 *   key and order), and a worker with that ordering takes through `<table>_take_filed`, which
 *   places due filed deliveries in SQL as place does (rows `FOR UPDATE SKIP LOCKED`, at most a
 *   batch; key rows created or woken in key order) before any head, so their bodies never travel
 *   to a worker. Unfiled ones are still handed out to be placed, and a take without filing runs
 *   `<table>_take_ordered` as before and ignores the columns: a new function, not an overload of
 *   it, so workers of the version before keep calling theirs, and an inbox without `ordering`
 *   appends and takes on tables not upgraded yet. Keys are stored with NUL escaped (text cannot
 *   hold it; `storedKey` in postgres-order.ts).
 * - `<table>_order`, one row per key: the highest order completed (`last`, so a late delivery is
 *   known), and `ready_at`, when the key may next have a head to run (null: nothing queued). The
 *   row is the key's lock: an ordered take locks the rows of ready keys `FOR UPDATE SKIP LOCKED`
 *   (keys another take holds are passed over, never waited for), then reads and leases their heads
 *   in a *later* statement of the same transaction (the take is a plpgsql function,
 *   `<table>_take_ordered`, so that is still one round trip). Under READ COMMITTED that statement's
 *   snapshot is taken after the locks are held, so it sees every take of those keys that
 *   committed before: two takes never lease two rows of one key, and different keys are taken by
 *   different workers at once, in batches. (In one statement the snapshot would predate the
 *   locks: a take committed in between would go unseen.) (pg-boss keeps one active job per `singletonKey` with a
 *   unique index and skips the keys it finds active; a lease that ends by time cannot be in an
 *   index predicate, so here the key row is the lock instead.)
 * - The head of a key is computed per locked key (`order_key, order_at` index, one row each): the
 *   lowest order among its queued deliveries (strict: due or not, so a retrying head holds its
 *   key; otherwise the lowest that is due). A key is busy while one of its rows is leased
 *   (`lease IS NOT NULL AND visible_at > now()`); the take then sets `ready_at` to the lease's end,
 *   so a crashed worker's key is looked at again when its lease has run out.
 * - Whatever frees a key wakes it (`ready_at = now()`), under the key row's lock: place, and two
 *   triggers on the deliveries table, so the inbox's own statements (complete, retry, bury,
 *   extend, requeue) need not know about keys. `_order_done` (AFTER DELETE of a queued row: only
 *   complete deletes one) also raises `last`; `_order_free` fires when a held lease is given up
 *   (retry, bury, a hand-back) or a dead letter is requeued.
 * - While any delivery is due unplaced or being placed, no head is handed out (the head of a key is
 *   the oldest of every delivery present, not only of those placed so far).
 * - The probes for an unplaced delivery (the take's, the chained completion's) are `PERFORM ...
 *   ORDER BY visible_at LIMIT 1`, not `EXISTS (...)`, which drops an ORDER BY, and the placing
 *   statement's probe for a placing in progress (`placers`) a MATERIALIZED CTE in that order,
 *   which an EXISTS over it cannot flatten. Autovacuum analyzes the table once a tenth of it
 *   changed; with the workers paused for a deployment, that is a backlog in which every row is
 *   unplaced. Planned from those statistics, an EXISTS expected a match at once in any index of
 *   the queued rows and, once they were placed, read all of them to find none, on every
 *   completion and take (ordered workers at 59 % of unordered ones in bench:order). In
 *   `visible_at` order only the unplaced rows' own index serves a probe without a filter or a
 *   sort (test/inbox/ordering-postgres-plans.test.ts).
 * - The take and completion functions run with `enable_seqscan = off`. The key table is small
 *   (a row per conversation with work) and analyzed small, and the planner then read it whole
 *   where its primary key finds one row: the `_order_done` trigger's update on every completion,
 *   and a hash of every key row for the join that tells a late delivery
 *   (test/inbox/ordering-postgres-plans.test.ts). Each of their statements has an index path.
 * - An idle key's row (nothing queued, untouched for the retention) is deleted by the inbox's
 *   maintenance and by `sweep()`; any write that gives it work again touches `updated_at` under
 *   the row's lock, which the delete re-checks.
 * - `<table>_flow`: one row: the pause flag with its `version` (written only if unchanged), and
 *   the token bucket (`tokens`, `refilled_at`, `per_second`), all updated by single statements
 *   that lock the row, so every worker shares one rate.
 * - `<table>_modes`: each running worker's mode (ordered or not) until a time it renews;
 *   `<table>_claim_mode` marks one unless a live mark of the other mode exists.
 */
import { quoteTable } from '../clients/postgres.js'

/** The quoted names of what ordering adds to an inbox on `table`. */
export interface OrderNames {
  deliveries: string
  order: string
  flow: string
  /** The function of the `_order_done` trigger (a queued row deleted: completed). */
  trigger: string
  /** The function of the `_order_free` trigger (a held lease given up, a dead letter requeued). */
  freed: string
  /** The ordered take's function, and the one that also places what appends filed. */
  take: string
  takeFiled: string
  /** The function that completes a head and leases its key's next one (`completeNext`). */
  completeNext: string
  /** The inbox's processed-keys table (postgres-sql.ts). */
  keys: string
  /** The workers' mode marks (src/inbox/worker-mode.ts) and the function that claims one. */
  modes: string
  claimMode: string
  base: string
}

export function orderNames(table: string): OrderNames {
  return {
    deliveries: quoteTable(table, 'PostgresInbox'),
    order: quoteTable(`${table}_order`, 'PostgresInbox'),
    flow: quoteTable(`${table}_flow`, 'PostgresInbox'),
    trigger: quoteTable(`${table}_order_done`, 'PostgresInbox'),
    freed: quoteTable(`${table}_order_free`, 'PostgresInbox'),
    take: quoteTable(`${table}_take_ordered`, 'PostgresInbox'),
    takeFiled: quoteTable(`${table}_take_filed`, 'PostgresInbox'),
    completeNext: quoteTable(`${table}_complete_next`, 'PostgresInbox'),
    keys: quoteTable(`${table}_keys`, 'PostgresInbox'),
    modes: quoteTable(`${table}_modes`, 'PostgresInbox'),
    claimMode: quoteTable(`${table}_claim_mode`, 'PostgresInbox'),
    base: table.split('.').pop()!,
  }
}

/**
 * The statements that add ordering and flow control to an inbox's tables (idempotent). A table
 * of an earlier version gets the columns it lacks, and a key row, ready now, for every key with a
 * delivery queued (its takes did not keep key rows): statements that run each time a process
 * calls ensureTable() and change nothing once done.
 */
export function createOrderingSql(table: string): string {
  const { deliveries: d, order: o, flow: f, trigger: t, freed, modes, claimMode, base } = orderNames(table)
  // An UPDATE first: the key's row is there nearly always (placing made it, and an idle key's row
  // goes only with nothing queued), and an UPDATE by primary key costs less than an INSERT ... ON
  // CONFLICT that finds it. The upsert stays for a row deleted meanwhile (or never made).
  const wake = (key: string, last: string) => `UPDATE ${o} AS o SET last = GREATEST(o.last, ${last}), ready_at = now(), updated_at = now() WHERE o.order_key = ${key};
    IF NOT FOUND THEN
      INSERT INTO ${o} AS o (order_key, last, ready_at) VALUES (${key}, ${last}, now())
      ON CONFLICT (order_key) DO UPDATE SET last = GREATEST(o.last, EXCLUDED.last), ready_at = now(), updated_at = now();
    END IF;`
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${d}'::regclass AND attname = 'placing_until' AND NOT attisdropped) THEN
    ALTER TABLE ${d} ADD COLUMN IF NOT EXISTS order_key text, ADD COLUMN IF NOT EXISTS order_at text,
      ADD COLUMN IF NOT EXISTS order_strict boolean, ADD COLUMN IF NOT EXISTS placing_until timestamptz;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${d}'::regclass AND attname = 'filed_at' AND NOT attisdropped) THEN
    ALTER TABLE ${d} ADD COLUMN IF NOT EXISTS filed_key text, ADD COLUMN IF NOT EXISTS filed_at text;
  END IF;
END $$;
CREATE INDEX IF NOT EXISTS "${base}_order_heads" ON ${d} (order_key, order_at, key) WHERE state = 'queued' AND order_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS "${base}_order_leased" ON ${d} (order_key) WHERE state = 'queued' AND order_key IS NOT NULL AND lease IS NOT NULL;
CREATE INDEX IF NOT EXISTS "${base}_unplaced" ON ${d} (visible_at) WHERE state = 'queued' AND order_key IS NULL;
CREATE TABLE IF NOT EXISTS ${o} (
  order_key text PRIMARY KEY,
  last text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  ready_at timestamptz
);
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${o}'::regclass AND attname = 'ready_at' AND NOT attisdropped) THEN
    ALTER TABLE ${o} ADD COLUMN IF NOT EXISTS ready_at timestamptz;
  END IF;
END $$;
CREATE INDEX IF NOT EXISTS "${base}_order_ready" ON ${o} (ready_at) WHERE ready_at IS NOT NULL;
INSERT INTO ${o} (order_key, last, ready_at)
SELECT DISTINCT d.order_key, '', now() FROM ${d} AS d
WHERE d.state = 'queued' AND d.order_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${o} AS k WHERE k.order_key = d.order_key AND k.ready_at IS NOT NULL)
ORDER BY 1
ON CONFLICT (order_key) DO UPDATE SET ready_at = now();
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
CREATE TABLE IF NOT EXISTS ${modes} (
  mode text NOT NULL,
  worker text NOT NULL,
  until timestamptz NOT NULL,
  PRIMARY KEY (mode, worker)
);
CREATE OR REPLACE FUNCTION ${claimMode}(p_mode text, p_worker text, p_ttl_ms float8) RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
  -- One claim at a time (the flow row's lock), and each statement below sees the claims committed
  -- before it: two workers of different modes starting at once cannot both mark.
  PERFORM 1 FROM ${f} WHERE id = 1 FOR UPDATE;
  DELETE FROM ${modes} WHERE until < clock_timestamp();
  IF EXISTS (SELECT 1 FROM ${modes} WHERE mode <> p_mode) THEN
    RETURN false;
  END IF;
  INSERT INTO ${modes} (mode, worker, until) VALUES (p_mode, p_worker, clock_timestamp() + p_ttl_ms * interval '1 millisecond')
  ON CONFLICT (mode, worker) DO UPDATE SET until = EXCLUDED.until;
  RETURN true;
END $fn$;
CREATE OR REPLACE FUNCTION ${t}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.order_key IS NOT NULL AND OLD.state = 'queued' THEN
    ${wake('OLD.order_key', 'OLD.order_at')}
  END IF;
  RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION ${freed}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  ${wake('NEW.order_key', "''")}
  RETURN NULL;
END $fn$;
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '${d}'::regclass AND tgname = '${base}_order_done') THEN
    CREATE TRIGGER "${base}_order_done" AFTER DELETE ON ${d} FOR EACH ROW EXECUTE FUNCTION ${t}();
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '${d}'::regclass AND tgname = '${base}_order_free') THEN
    CREATE TRIGGER "${base}_order_free" AFTER UPDATE ON ${d} FOR EACH ROW
    WHEN (OLD.order_key IS NOT NULL AND NEW.order_key IS NOT NULL AND (
      (OLD.state = 'dead' AND NEW.state = 'queued')
      OR (OLD.state = 'queued' AND OLD.lease IS NOT NULL AND (NEW.lease IS NULL OR NEW.visible_at < OLD.visible_at))))
    EXECUTE FUNCTION ${freed}();
  END IF;
END $$;
${takeFunctionSql(table, false)}
${takeFunctionSql(table, true)}
${completeNextFunctionSql(table)}`
}

/**
 * The statement that completes a delivery (postgres-sql.ts's `complete`), its key, lease and
 * retention given as SQL: a statement's parameters, or the arguments of `<table>_complete_next`.
 * Data-modifying CTEs always run to completion: the keys are marked processed whenever the
 * delivery row was ours to delete. The outer SELECT reads the snapshot from before the
 * statement, so its second test is true only for a repeat: this lease completed it before (a
 * reply lost with a dropped connection, a database restart) and the keys are still kept.
 * `deleted` says the row went now (not a repeat). `into`: plpgsql variables to read the two into.
 */
export function completeSql(table: string, key: string, lease: string, retention: string, into?: string): string {
  const { deliveries: d, keys: k } = orderNames(table)
  return `WITH done AS (
  DELETE FROM ${d} WHERE key = ${key} AND lease = ${lease} AND state = 'queued' AND visible_at > now() RETURNING keys
),
processed AS (
  UPDATE ${k} AS k SET processed_until = now() + ${ms(retention)}, completed_by = ${lease}
  FROM done WHERE k.key = ANY (done.keys) AND k.delivery = ${key}
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM done)
  OR EXISTS (SELECT 1 FROM ${k} WHERE key = ${key} AND delivery = ${key} AND completed_by = ${lease} AND processed_until > now()) AS done,
  EXISTS (SELECT 1 FROM done) AS deleted${into ? `\n  INTO ${into}` : ''}`
}

/**
 * `<table>_complete_next`: completes a head as `complete` does and, in the same round trip,
 * leases the next head of its key to the caller, so a worker going through a conversation needs
 * no ordered take between two of its messages (a take locks ready keys, finds each one's head
 * and marks them, and with several workers passes over the keys another one holds). A plpgsql
 * function for the same reason as the take: the completion's delete wakes the key under its row's lock (the
 * `_order_done` trigger), and the next head is read by a *later* statement, whose snapshot sees
 * every place and take of the key committed before that lock. The next head is leased only when
 * a take would lease it now: due, nothing unplaced that could come before it (unfiled, or filed
 * under this key), the inbox not paused (no other row of the key can be leased: the completed one
 * was, and a take leases no row of a key with a row leased); and never a suspect
 * (a hand-out that ended without a result: suspects run alone, through a take). Otherwise the key
 * stays woken for the next take. The lease is derived from the completing one, so a repeat of the
 * same completion (its reply lost) brings back the same next head instead of leasing another.
 * Arguments: primary key, lease, retention ms, the key as stored, chain (false: complete only),
 * visibility ms. One row: `done` (complete's answer), and the next head's columns, or NULLs.
 */
function completeNextFunctionSql(table: string): string {
  const { deliveries: d, order: o, flow: f, completeNext } = orderNames(table)
  const visibility = `interval '1 millisecond' * p_visibility_ms`
  // Plain statements under IF, each planned once per session: one statement of CTEs would start
  // up its data-modifying parts on every call, leasing something or not.
  return `CREATE OR REPLACE FUNCTION ${completeNext}(p_key text, p_lease text, p_retention_ms float8, p_order_key text, p_chain boolean, p_visibility_ms float8)
RETURNS TABLE (done boolean, ${TAKE_COLUMNS.replace('kind text, ', '')}) LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $fn$
#variable_conflict use_column
DECLARE
  v_deleted boolean;
  v_head text;
  v_next text := md5(p_lease || ':next')::uuid::text;
BEGIN
  ${completeSql(table, 'p_key', 'p_lease', 'p_retention_ms', 'done, v_deleted')};
  IF NOT done OR NOT p_chain THEN
    RETURN NEXT;
    RETURN;
  END IF;
  IF NOT v_deleted THEN
    -- A repeat: the head this lease's first completion leased, while still held.
    RETURN QUERY SELECT true, ${columns('a')}, (a.order_at < o.last) FROM ${d} AS a LEFT JOIN ${o} AS o ON o.order_key = a.order_key
      WHERE a.order_key = p_order_key AND a.state = 'queued' AND a.lease = v_next AND a.visible_at > now();
    IF NOT FOUND THEN RETURN NEXT; END IF;
    RETURN;
  END IF;
  -- The key's row is locked (the trigger woke it): what this statement reads was committed before.
  SELECT h.key INTO v_head FROM ${d} AS h
  WHERE h.order_key = p_order_key AND h.state = 'queued' AND (h.order_strict OR h.visible_at <= now())
  ORDER BY h.order_at, h.key LIMIT 1;
  IF v_head IS NULL OR EXISTS (SELECT 1 FROM ${f} WHERE id = 1 AND paused) THEN
    RETURN NEXT;
    RETURN;
  END IF;
  -- Nothing unplaced that could come first: probed in the unplaced rows' index order (the file's header says why).
  PERFORM 1 FROM ${d} AS u WHERE u.state = 'queued' AND u.order_key IS NULL AND (u.filed_key IS NULL OR u.filed_key = p_order_key)
    AND (u.visible_at <= now() OR (u.placing_until > now() AND u.visible_at > now()))
  ORDER BY u.visible_at LIMIT 1;
  IF FOUND THEN
    RETURN NEXT;
    RETURN;
  END IF;
  RETURN QUERY WITH leased AS (
    UPDATE ${d} AS d SET lease = v_next, visible_at = now() + ${visibility}, takes = d.takes + 1
    WHERE d.key = v_head AND d.state = 'queued' AND d.visible_at <= now() AND d.takes <= d.attempts
    RETURNING ${columns('d')}
  )
  SELECT true, leased.*, (leased.order_at < o.last) FROM leased LEFT JOIN ${o} AS o ON o.order_key = leased.order_key;
  IF NOT FOUND THEN RETURN NEXT; END IF;
END $fn$;`
}

/**
 * What the ordered take function returns: a taken entry's columns, its order, and what it is for.
 * CREATE OR REPLACE cannot change a function's result columns: a change here needs a DROP FUNCTION
 * before it in createOrderingSql.
 */
const TAKE_COLUMNS = `kind text, keys text[], endpoint text, id text, signed_timestamp float8, signature_version text,
  secret_index integer, body bytea, received_ms float8, attempts integer, takes integer, retries_since_ms float8,
  last_error text, lease text, dead_ms float8, traceparent text, order_key text, order_at text, late boolean`

/**
 * The ordered take, a plpgsql function: its statements run one after the other in one
 * transaction, each with a snapshot of its own (a VOLATILE function's statement sees what
 * committed before it started, under READ COMMITTED), in one round trip, their plans kept by
 * the session. Generic plans only (`plan_cache_mode = force_generic_plan`): left to choose,
 * plpgsql planned the heads statement afresh on a quarter of the takes (over a millisecond each,
 * more than running it) for plans no better than the generic one. The arguments: placing batch,
 * placing lease ms, keys to lock, max heads, visibility ms; with `filed` (`<table>_take_filed`),
 * then filing batch and strict.
 * 1. Unplaced due rows are leased to be placed (kind 'place'). With `filed`, the same statement
 *    (one scan of them) places the filed ones among the first `file_batch` itself, as place()
 *    does, and leases only the others. A row of kind 'busy' says another worker is placing, or is
 *    leasing or filing due rows this statement skipped, or more were filed than one batch. Either
 *    way it ends there: no key is locked. What it does not see was appended after the take began: not present.
 * 2. Up to `lock_keys` ready keys, oldest first, locked FOR UPDATE SKIP LOCKED. The shared advisory
 *    lock only excludes the take of the version before this one (an exclusive lock per inbox)
 *    while both run during an upgrade.
 * 3. With a snapshot taken after those locks: for each locked key its head, leased when it is due
 *    and no row of the key is leased (kind 'run', oldest first, at most `max_heads`), and the key's
 *    `ready_at` set to when to look at it again: the lease's end (taken, or busy), the head's due
 *    time (strict) or the first due time of its rows, null with nothing queued. A key whose due
 *    head was left for lack of room keeps its `ready_at`, so it comes first next time.
 */
function takeFunctionSql(table: string, filed: boolean): string {
  const { deliveries: d, order: o, take, takeFiled } = orderNames(table)
  const unplaced = `SELECT 1 FROM ${d} WHERE state = 'queued' AND order_key IS NULL AND (visible_at <= now() OR (placing_until > now() AND visible_at > now()))`
  const taken = (param: string) => `interval '1 millisecond' * ${param}`
  const lease = `lease = gen_random_uuid()::text, visible_at = now() + ${taken('place_lease_ms')}, placing_until = now() + ${taken('place_lease_ms')}`
  const busy = `SELECT 'busy'::text, ${Array.from({ length: 17 }, () => 'NULL').join(', ')}, false`
  // With `filed`, one scan of the unplaced rows does both: filed ones are placed as place() places
  // them, key rows created or woken in key order (two filing takes, or a take and a place, never
  // wait on each other in a cycle); the rest are leased to be placed. The statement's snapshot
  // predates its own writes: what it filed is left out of the busy test by key.
  const placing = filed
    ? `WITH due AS (
    SELECT key, filed_key IS NOT NULL AS filed FROM ${d} WHERE state = 'queued' AND order_key IS NULL AND visible_at <= now()
    ORDER BY visible_at LIMIT file_batch
    FOR UPDATE SKIP LOCKED
  ),
  placed AS (
    UPDATE ${d} AS d SET order_key = d.filed_key, order_at = d.filed_at, order_strict = file_strict, lease = NULL, placing_until = NULL
    FROM due WHERE d.key = due.key AND due.filed
    RETURNING d.order_key
  ),
  woken AS (
    INSERT INTO ${o} AS o (order_key, last, ready_at) SELECT DISTINCT order_key, '', now() FROM placed ORDER BY 1
    ON CONFLICT (order_key) DO UPDATE SET ready_at = now(), updated_at = now()
  ),
  to_place AS (
    UPDATE ${d} AS d SET ${lease}
    FROM (SELECT key FROM due WHERE NOT due.filed LIMIT place_batch) AS due WHERE d.key = due.key
    RETURNING ${placingColumns('d')}
  ),
  placers AS MATERIALIZED (
    ${unplaced} AND key NOT IN (SELECT key FROM due WHERE due.filed) ORDER BY visible_at LIMIT 1
  )
  SELECT 'place'::text, to_place.*, false FROM to_place
  UNION ALL
  ${busy} WHERE NOT EXISTS (SELECT 1 FROM to_place) AND EXISTS (SELECT 1 FROM placers);`
    : `WITH due AS (
    SELECT key FROM ${d} WHERE state = 'queued' AND order_key IS NULL AND visible_at <= now()
    ORDER BY visible_at LIMIT place_batch
    FOR UPDATE SKIP LOCKED
  ),
  to_place AS (
    UPDATE ${d} AS d SET ${lease}
    FROM due WHERE d.key = due.key
    RETURNING ${placingColumns('d')}
  ),
  placers AS MATERIALIZED (
    ${unplaced} ORDER BY visible_at LIMIT 1
  )
  SELECT 'place'::text, to_place.*, false FROM to_place
  UNION ALL
  ${busy} WHERE NOT EXISTS (SELECT 1 FROM due) AND EXISTS (SELECT 1 FROM placers);`
  return `CREATE OR REPLACE FUNCTION ${filed ? takeFiled : take}(place_batch integer, place_lease_ms float8, lock_keys integer, max_heads integer, visibility_ms float8${filed ? ', file_batch integer, file_strict boolean' : ''})
RETURNS TABLE (${TAKE_COLUMNS}) LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
#variable_conflict use_column
DECLARE
  taking text[];
BEGIN
  ${filed ? `-- Nearly every take of a filing inbox finds nothing unplaced: one probe of the unplaced rows'
  -- index then spares it the placing statement (its scan, locks and three writes set up for none).
  -- In that index's order, not as an EXISTS (the file's header says why).
  PERFORM 1 FROM ${d} WHERE state = 'queued' AND order_key IS NULL ORDER BY visible_at LIMIT 1;
  IF FOUND THEN
    RETURN QUERY ${placing}
  END IF;` : `RETURN QUERY ${placing}`}
  IF FOUND OR max_heads <= 0 THEN RETURN; END IF;
  PERFORM pg_advisory_xact_lock_shared(hashtext('${table}'));
  SELECT array_agg(k.order_key) INTO taking FROM (
    SELECT order_key FROM ${o} WHERE ready_at <= now()
    ORDER BY ready_at LIMIT lock_keys
    FOR UPDATE SKIP LOCKED
  ) AS k;
  IF taking IS NULL THEN RETURN; END IF;
  RETURN QUERY WITH keys AS (
    SELECT unnest(taking) AS order_key
  ),
  busy AS (
    SELECT d.order_key, max(d.visible_at) AS until FROM ${d} AS d JOIN keys ON d.order_key = keys.order_key
    WHERE d.state = 'queued' AND d.lease IS NOT NULL AND d.visible_at > now()
    GROUP BY d.order_key
  ),
  heads AS (
    SELECT keys.order_key, h.key, h.order_at, h.visible_at FROM keys
    LEFT JOIN LATERAL (
      SELECT d.key, d.order_at, d.visible_at FROM ${d} AS d
      WHERE d.order_key = keys.order_key AND d.state = 'queued' AND (d.order_strict OR d.visible_at <= now())
      ORDER BY d.order_at, d.key LIMIT 1
    ) AS h ON true
    WHERE NOT EXISTS (SELECT 1 FROM busy WHERE busy.order_key = keys.order_key)
  ),
  chosen AS (
    SELECT d.key FROM ${d} AS d
    WHERE d.key IN (SELECT heads.key FROM heads WHERE heads.visible_at <= now() ORDER BY heads.order_at LIMIT max_heads)
      AND d.state = 'queued' AND d.visible_at <= now()
    FOR UPDATE SKIP LOCKED
  ),
  leased AS (
    UPDATE ${d} AS d SET lease = gen_random_uuid()::text, visible_at = now() + ${taken('visibility_ms')}, takes = d.takes + 1
    FROM chosen WHERE d.key = chosen.key
    RETURNING ${columns('d')}
  ),
  next AS (
    SELECT keys.order_key, CASE
      WHEN busy.until IS NOT NULL THEN busy.until
      WHEN EXISTS (SELECT 1 FROM leased WHERE leased.order_key = keys.order_key) THEN now() + ${taken('visibility_ms')}
      WHEN heads.visible_at <= now() THEN NULL
      WHEN heads.key IS NOT NULL THEN heads.visible_at
      ELSE (SELECT min(d.visible_at) FROM ${d} AS d WHERE d.order_key = keys.order_key AND d.state = 'queued')
    END AS ready_at,
    heads.visible_at <= now() AND NOT EXISTS (SELECT 1 FROM leased WHERE leased.order_key = keys.order_key) AS waiting
    FROM keys LEFT JOIN busy ON busy.order_key = keys.order_key LEFT JOIN heads ON heads.order_key = keys.order_key
  ),
  marked AS (
    UPDATE ${o} AS o SET ready_at = next.ready_at FROM next WHERE o.order_key = next.order_key AND next.waiting IS NOT TRUE
  )
  SELECT 'run'::text, leased.*, (leased.order_at < o.last) FROM leased LEFT JOIN ${o} AS o ON o.order_key = leased.order_key;
END $fn$;`
}

/** The flow state as stats columns (`paused`, `paused_by`, `per_second`), for the inbox's stats statement. */
export function flowColumns(table: string): string {
  const { flow: f } = orderNames(table)
  return `(SELECT paused FROM ${f} WHERE id = 1) AS paused, (SELECT paused_by FROM ${f} WHERE id = 1) AS paused_by, (SELECT per_second FROM ${f} WHERE id = 1) AS per_second`
}

/**
 * The key rows that may go: untouched for `retention` (an SQL expression, milliseconds) and with
 * no delivery queued (pending, retrying or running), skipping rows a take or a place holds. The
 * caller's DELETE re-checks `updated_at` on the row's newest version: a place, complete, retry or
 * requeue that gave the key work meanwhile touched it under the same lock.
 */
function idleKeys(table: string, retention: string, limit: string, extra = 'true'): string {
  const { deliveries: d, order: o } = orderNames(table)
  return `SELECT order_key FROM ${o} AS o WHERE o.updated_at < now() - ${ms(retention)} AND ${extra}
    AND NOT EXISTS (SELECT 1 FROM ${d} WHERE order_key = o.order_key AND state = 'queued')
    LIMIT ${limit} FOR UPDATE SKIP LOCKED`
}

/**
 * A CTE for the inbox's sweep statement ($1 limit, $2 retention ms): deletes the key rows of keys
 * idle for the retention (their `last` is what tells a late delivery, so it is kept that long).
 */
export function sweepOrderCte(table: string): string {
  const { order: o } = orderNames(table)
  return `order_gone AS (
  DELETE FROM ${o} WHERE order_key IN (${idleKeys(table, '$2', '$1')}) AND updated_at < now() - ${ms('$2')}
)`
}

/**
 * The maintenance statement for the key rows (the shape of src/clients/postgres-maintenance.ts's:
 * `$1` the batch size, `$2` the lock's name; deletes only while this statement holds the inbox's
 * maintenance lock): the rows of keys idle for `retentionMs`, as {@link sweepOrderCte}.
 */
export function orderMaintenanceSql(table: string, retentionMs: number): string {
  const { order: o } = orderNames(table)
  const retention = String(Math.ceil(retentionMs))
  return `WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtext($2)) AS got),
gone AS (
  DELETE FROM ${o} WHERE order_key IN (${idleKeys(table, retention, '$1', '(SELECT got FROM lock)')})
    AND updated_at < now() - ${ms(retention)} RETURNING 1
)
SELECT (SELECT got FROM lock) AS got, (SELECT count(*) FROM gone)::int AS n`
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

/**
 * The columns a delivery handed out to be placed is read with, in the places of {@link columns}:
 * only what placing reads (the primary key, the body for the key function, the time received for
 * the order, the placing lease) and the delivery's id, the rest NULL. Placing a backlog reads
 * every body once more: the other columns are neither formatted nor parsed twice.
 */
function placingColumns(alias: string): string {
  const c = (column: string) => `${alias}.${column}`
  return [
    `ARRAY[${c('key')}]`,
    'NULL::text',
    c('id'),
    'NULL::float8',
    'NULL::text',
    'NULL::integer',
    c('body'),
    `(extract(epoch FROM ${c('received_at')}) * 1000)::float8`,
    'NULL::integer',
    'NULL::integer',
    'NULL::float8',
    'NULL::text',
    c('lease'),
    'NULL::float8',
    'NULL::text',
    'NULL::text',
    'NULL::text',
  ].join(', ')
}

/** The columns a taken entry is read with: postgres-sql.ts's, and its order. */
function columns(alias: string): string {
  return `${entryColumns(alias, { dead: false })}, ${alias}.order_key, ${alias}.order_at`
}

export type OrderStatements = Record<'take' | 'takeFiled' | 'completeNext' | 'place' | 'admit' | 'read' | 'refund' | 'setPause' | 'claimMode' | 'releaseMode', string>

export function orderStatements(table: string): OrderStatements {
  const { deliveries: d, order: o, flow: f, take: takeFunction, takeFiled, completeNext, modes, claimMode } = orderNames(table)
  const avail = `LEAST($3::float8, COALESCE(t.tokens + GREATEST(0, extract(epoch FROM now() - t.refilled_at)) * $2::float8, $3::float8))`
  const granted = `GREATEST(0, LEAST($1::float8, floor(${avail})))`
  const pause = `t.paused, t.paused_by, COALESCE((extract(epoch FROM t.paused_since) * 1000)::float8, 0) AS since_ms, t.version`
  return {
    // $1 placing batch, $2 placing lease ms, $3 keys to lock, $4 max heads, $5 visibility ms.
    take: `SELECT * FROM ${takeFunction}($1::integer, $2::float8, $3::integer, $4::integer, $5::float8)`,
    // The same, $6 filing batch, $7 strict: places what appends filed first.
    takeFiled: `SELECT * FROM ${takeFiled}($1::integer, $2::float8, $3::integer, $4::integer, $5::float8, $6::integer, $7::boolean)`,
    // $1 primary key, $2 lease, $3 retention ms, $4 the key as stored, $5 chain, $6 visibility ms.
    completeNext: `SELECT * FROM ${completeNext}($1::text, $2::text, $3::float8, $4::text, $5::boolean, $6::float8)`,
    // $1 keys, $2 leases, $3 order keys, $4 orders, $5 strict. The placing lease must still be
    // held. Each key's row is created or woken, in key order (two places never wait on each other).
    place: `WITH placed AS (
  UPDATE ${d} AS d SET order_key = p.order_key, order_at = p.order_at, order_strict = p.strict, lease = NULL, visible_at = now(), placing_until = NULL
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[]) AS p (key, lease, order_key, order_at, strict)
  WHERE d.key = p.key AND d.lease = p.lease AND d.state = 'queued' AND d.visible_at > now() AND d.order_key IS NULL
  RETURNING d.key, d.order_key
),
woken AS (
  INSERT INTO ${o} AS o (order_key, last, ready_at) SELECT DISTINCT order_key, '', now() FROM placed ORDER BY 1
  ON CONFLICT (order_key) DO UPDATE SET ready_at = now(), updated_at = now()
)
SELECT key FROM placed`,
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
    // $1 mode, $2 worker, $3 ttl ms.
    claimMode: `SELECT ${claimMode}($1::text, $2::text, $3::float8) AS claimed`,
    // $1 mode, $2 worker.
    releaseMode: `DELETE FROM ${modes} WHERE mode = $1 AND worker = $2`,
  }
}
