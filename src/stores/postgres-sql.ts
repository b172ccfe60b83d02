/**
 * Every SQL statement of the Postgres idempotency store and secret source, built from the table
 * name alone, as pg-boss keeps its statements in `plans.ts`: a reader finds the storage logic
 * without reading a constructor. (The inbox's are in src/inbox/postgres-sql.ts.)
 */
import { quoteTable } from '../clients/postgres.js'

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

/** The store's statements; `t` is the quoted table name. */
export interface StoreStatements {
  claim: string
  complete: string
  release: string
  sweep: string
}

/**
 * The store's statements for the quoted table `t`: claim, complete and release are one statement
 * each; `$3` is a lease or a retention in milliseconds, timed by the database clock.
 *
 * @example
 * const sql = storeStatements(quoteTable('svc_webhooks_deliveries'))
 */
export function storeStatements(t: string): StoreStatements {
  const expiry = `now() + interval '1 millisecond' * $3::float8`
  return {
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
    // Only a live claim is ours to release: an expired one answers false, as in every store.
    release: `DELETE FROM ${t} WHERE key = $1 AND owner = $2 AND NOT completed AND expires_at > now() RETURNING 1`,
    // The outer expiry test is not redundant: a DELETE that waited on a row a claim has just
    // taken over re-checks only its own WHERE on the newest row version (READ COMMITTED); the
    // sub-select's answer comes from the old snapshot, and alone it would delete the new claim.
    sweep: `DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at < now() LIMIT $1) AND expires_at < now() RETURNING 1`,
  }
}

/**
 * The `CREATE TABLE` statement of the secret sources' table, for your migrations.
 *
 * @example
 * await pool.query(createSecretTableSql())
 */
export function createSecretTableSql(table = 'svc_webhooks_secrets'): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(table, 'PostgresSecretSource')} (
  name text PRIMARY KEY,
  state text NOT NULL,
  version bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
)`
}

/**
 * The statement that adds the `version` column to a secret sources' table made by an earlier
 * version (conditional writes need it), for your migrations; run on first use unless
 * `createTable: false`.
 *
 * @example
 * await pool.query(migrateSecretTableSql())
 */
export function migrateSecretTableSql(table = 'svc_webhooks_secrets'): string {
  return `ALTER TABLE ${quoteTable(table, 'PostgresSecretSource')} ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0`
}

/** The secret source's statements. */
export interface SecretStatements {
  read: string
  /** Unconditional: the next version whatever the stored one is. */
  write: string
  /** Only if there is no row yet, or its version is 0 (a row of an earlier version). */
  writeIfNew: string
  /** Only if the stored version is $3 (1 or more). */
  writeIf: string
  create: string
  migrate: string
}

/**
 * The secret source's statements for the quoted table `t` (named `table`).
 *
 * @example
 * const sql = secretStatements(quoteTable('svc_webhooks_secrets', 'PostgresSecretSource'), 'svc_webhooks_secrets')
 */
export function secretStatements(t: string, table: string): SecretStatements {
  return {
    read: `SELECT state, version FROM ${t} WHERE name = $1`,
    write: `INSERT INTO ${t} AS cur (name, state, version, updated_at) VALUES ($1, $2, 1, now())
ON CONFLICT (name) DO UPDATE SET state = EXCLUDED.state, version = cur.version + 1, updated_at = EXCLUDED.updated_at`,
    // One statement, checked and set by the row lock: no row yet is version 0.
    writeIfNew: `INSERT INTO ${t} AS cur (name, state, version, updated_at) VALUES ($1, $2, 1, now())
ON CONFLICT (name) DO UPDATE SET state = EXCLUDED.state, version = 1, updated_at = EXCLUDED.updated_at
WHERE cur.version = 0`,
    writeIf: `UPDATE ${t} SET state = $2, version = version + 1, updated_at = now() WHERE name = $1 AND version = $3::bigint`,
    create: createSecretTableSql(table),
    migrate: migrateSecretTableSql(table),
  }
}
