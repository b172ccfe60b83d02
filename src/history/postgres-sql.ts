/**
 * Every SQL statement of `PostgresHistory` (postgres.ts), built from the table name alone. The
 * write applies a batch of records with merge.ts's rules: an UPDATE of the rows that exist, then
 * an INSERT of the others, in one statement.
 */
import { quoteTable } from '../clients/postgres.js'

/**
 * The `CREATE TABLE` statements of the history (entries and refusal counts), for your migrations.
 *
 * @example
 * await pool.query(createHistoryTableSql())
 */
export function createHistoryTableSql(table = 'svc_webhooks_history'): string {
  const t = quoteTable(table, 'PostgresHistory')
  const r = quoteTable(`${table}_refusals`, 'PostgresHistory')
  const base = table.replace('.', '_')
  return `CREATE TABLE IF NOT EXISTS ${t} (
  endpoint text NOT NULL,
  id text NOT NULL,
  event_type text,
  received_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  processed_at bigint,
  outcome text NOT NULL,
  status integer,
  code text,
  attempts integer NOT NULL DEFAULT 0,
  deliveries integer NOT NULL DEFAULT 0,
  error_name text,
  error_message text,
  body text,
  body_redacted boolean NOT NULL DEFAULT false,
  replays integer NOT NULL DEFAULT 0,
  replayed_at bigint,
  PRIMARY KEY (endpoint, id)
);
CREATE INDEX IF NOT EXISTS "${base}_received" ON ${t} (received_at DESC, endpoint DESC, id DESC);
CREATE INDEX IF NOT EXISTS "${base}_id" ON ${t} (id);
CREATE TABLE IF NOT EXISTS ${r} (
  window_start bigint NOT NULL,
  code text NOT NULL,
  count bigint NOT NULL,
  claimed_ids text[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (window_start, code)
);`
}

const RECORD = `jsonb_to_recordset($1::jsonb) AS r(ep text, id text, at bigint, o text, soft boolean, t text, s int, c text, a int, aa boolean, d boolean, p boolean, en text, em text, clr boolean, b text, br boolean, rp boolean)`
const COLUMNS = 'endpoint, id, event_type, received_at, updated_at, processed_at, outcome, status, code, attempts, deliveries, error_name, error_message, body, body_redacted, replays, replayed_at'

export function historyStatements(table: string) {
  const t = quoteTable(table, 'PostgresHistory')
  const r = quoteTable(`${table}_refusals`, 'PostgresHistory')
  // `keep` is true when the record may set the outcome: not soft, and not older than the entry's last change.
  const keep = `NOT COALESCE(r.soft, false) AND r.at >= h.updated_at`
  return {
    write: `WITH r AS (SELECT * FROM ${RECORD}),
up AS (
  UPDATE ${t} h SET
    received_at = LEAST(h.received_at, r.at),
    updated_at = GREATEST(h.updated_at, r.at),
    event_type = COALESCE(r.t, h.event_type),
    deliveries = h.deliveries + CASE WHEN r.d THEN 1 ELSE 0 END,
    outcome = CASE WHEN ${keep} THEN r.o ELSE h.outcome END,
    status = CASE WHEN ${keep} AND r.s IS NOT NULL THEN r.s ELSE h.status END,
    code = CASE WHEN NOT (${keep}) THEN h.code WHEN r.c IS NOT NULL THEN r.c WHEN r.s IS NOT NULL THEN NULL ELSE h.code END,
    attempts = COALESCE(r.a, h.attempts) + CASE WHEN r.aa THEN 1 ELSE 0 END,
    processed_at = CASE WHEN r.p THEN r.at ELSE h.processed_at END,
    error_name = CASE WHEN r.clr THEN NULL WHEN r.en IS NOT NULL THEN r.en ELSE h.error_name END,
    error_message = CASE WHEN r.clr THEN NULL WHEN r.en IS NOT NULL THEN r.em ELSE h.error_message END,
    body = COALESCE(r.b, h.body),
    body_redacted = CASE WHEN r.b IS NOT NULL THEN COALESCE(r.br, false) ELSE h.body_redacted END,
    replays = h.replays + CASE WHEN r.rp THEN 1 ELSE 0 END,
    replayed_at = CASE WHEN r.rp THEN r.at ELSE h.replayed_at END
  FROM r WHERE h.endpoint = r.ep AND h.id = r.id
  RETURNING h.endpoint, h.id
),
ins AS (
  INSERT INTO ${t} (${COLUMNS})
  SELECT r.ep, r.id, r.t, r.at, r.at, CASE WHEN r.p THEN r.at END, r.o, r.s, r.c,
    COALESCE(r.a, 0) + CASE WHEN r.aa THEN 1 ELSE 0 END, CASE WHEN r.d THEN 1 ELSE 0 END,
    CASE WHEN r.clr THEN NULL ELSE r.en END, CASE WHEN r.clr THEN NULL ELSE r.em END,
    r.b, COALESCE(r.br, false) AND r.b IS NOT NULL, CASE WHEN r.rp THEN 1 ELSE 0 END, CASE WHEN r.rp THEN r.at END
  FROM r WHERE NOT EXISTS (SELECT 1 FROM up WHERE up.endpoint = r.ep AND up.id = r.id)
  ON CONFLICT (endpoint, id) DO NOTHING
  RETURNING 1
)
SELECT (SELECT count(*) FROM up) + (SELECT count(*) FROM ins) AS applied`,
    refusals: `INSERT INTO ${r} AS w (window_start, code, count, claimed_ids)
SELECT x.w, x.code, x.n, x.ids FROM jsonb_to_recordset($1::jsonb) AS j(w bigint, code text, n bigint, ids jsonb)
CROSS JOIN LATERAL (SELECT j.w, j.code, j.n, ARRAY(SELECT jsonb_array_elements_text(j.ids)) AS ids) x
ON CONFLICT (window_start, code) DO UPDATE SET count = w.count + EXCLUDED.count,
  claimed_ids = (SELECT ARRAY(SELECT DISTINCT ON (v) v FROM unnest(w.claimed_ids || EXCLUDED.claimed_ids) v LIMIT 10))`,
    // Bounded work per call: the expired, then the oldest past the bound, a slice at a time.
    trimExpired: `DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t} WHERE received_at < $1 LIMIT 5000)`,
    trimOver: `DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t} ORDER BY received_at DESC, endpoint DESC, id DESC OFFSET $1 LIMIT 5000)`,
    trimRefusals: `DELETE FROM ${r} WHERE window_start < $1`,
    list: `SELECT endpoint, id, event_type, received_at, updated_at, processed_at, outcome, status, code, attempts, deliveries,
  error_name, error_message, body IS NOT NULL AS has_body, body_redacted, replays, replayed_at
FROM ${t}
WHERE received_at >= $1 AND received_at < $2
  AND ($3::text IS NULL OR endpoint = $3) AND ($4::text IS NULL OR outcome = $4)
  AND ($5::bigint IS NULL OR (received_at, endpoint, id) < ($5, $6, $7))
ORDER BY received_at DESC, endpoint DESC, id DESC LIMIT $8`,
    get: `SELECT endpoint, id, event_type, received_at, updated_at, processed_at, outcome, status, code, attempts, deliveries,
  error_name, error_message, body IS NOT NULL AS has_body, body_redacted, replays, replayed_at, body
FROM ${t} WHERE id = $1 AND ($2::text IS NULL OR endpoint = $2) ORDER BY received_at DESC LIMIT 1`,
    listRefusals: `SELECT window_start, code, count, claimed_ids FROM ${r} WHERE window_start >= $1 ORDER BY window_start DESC, count DESC LIMIT 2000`,
    size: `SELECT count(*)::bigint AS n FROM ${t}`,
  }
}
