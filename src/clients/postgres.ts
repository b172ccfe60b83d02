/**
 * What PostgresStore and PostgresInbox share: the client shape they take (a `pg` Pool or Client,
 * or anything with `query(text, values)`; `pg` is not a dependency) and the quoting of a table
 * option. Not a public entry: `svc-webhooks/postgres` re-exports the {@link PostgresQueryable} type.
 */

/** The part of a `pg` `Pool` or `Client` the store and the inbox use. */
export interface PostgresQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/**
 * `table` (a plain name or `schema.name`) double-quoted for SQL; a TypeError naming `owner`'s
 * option for anything else, so a table name can never carry SQL.
 *
 * @example
 * quoteTable('webhooks.deliveries') // '"webhooks"."deliveries"'
 */
export function quoteTable(table: unknown, owner = 'PostgresStore'): string {
  const parts = typeof table === 'string' ? table.split('.') : []
  if (parts.length === 0 || parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new TypeError(`svc-webhooks: ${owner} \`table\` must be a plain name or schema.name (letters, digits, underscores).`)
  }
  return parts.map((part) => `"${part}"`).join('.')
}

/**
 * SQLSTATE classes that say "not now" rather than "never": connection exception (08), invalid
 * transaction state (25: a read-only transaction on a standby just after a failover), transaction
 * rollback (40: serialization failure, deadlock), insufficient resources (53), object not in
 * prerequisite state (55: lock not available), operator intervention (57: shutdown, cannot connect
 * now, cancelled), system error (58), internal error (XX).
 */
const TRANSIENT_CLASSES = new Set(['08', '25', '40', '53', '55', '57', '58', 'XX'])

/**
 * Whether `error` is an error the database answered that repeating will not fix: a value it
 * cannot store (a NUL in text, 22021; a string too long, 22001), a check violation (23514), a
 * missing table (42P01). An error with no SQLSTATE (a dropped connection, a refused connect, a
 * client timeout) or of a transient class is not.
 *
 * @example
 * withDeadline('PostgresInbox.retry', 2000, attempt, { refused: isPostgresRefusal })
 */
export function isPostgresRefusal(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown }
  // A Postgres error carries a severity and a five-character SQLSTATE; Node's own errors
  // (ECONNREFUSED, EPIPE) have a code but no severity.
  if (typeof severity !== 'string' || typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false
  return !TRANSIENT_CLASSES.has(code.slice(0, 2))
}

/**
 * What a primary's replication looks like, for {@link standbyWarnings}: its streaming standbys,
 * whether commits wait for one (`synchronous_standby_names`), and `synchronous_commit`.
 */
export const STANDBY_SETTINGS = `SELECT (SELECT count(*)::int FROM pg_stat_replication) AS standbys,
  current_setting('synchronous_standby_names') AS sync_names, current_setting('synchronous_commit') AS synchronous_commit`

/**
 * The lines `durabilityWarnings()` adds for a primary with streaming standbys, once it has any (a
 * single database's promise is its own fsync): a standby no commit waits for (a promote loses
 * what it had not received, after the sender was told 2xx), and `synchronous_commit` `local` or
 * `off`, which stop waiting for the synchronous standby.
 *
 * @example
 * standbyWarnings(await first(STANDBY_SETTINGS), 'PostgresStore')
 */
export function standbyWarnings(row: { standbys?: unknown; sync_names?: unknown; synchronous_commit?: unknown } | undefined, what: string): string[] {
  if (row === undefined || !(Number(row.standbys) > 0)) return []
  if (String(row.sync_names ?? '').trim() === '') {
    return [`svc-webhooks: ${what}: the database streams to an asynchronous standby: a promote loses the commits it had not received yet, deliveries answered 2xx. Name the standby in synchronous_standby_names (docs/topologies.md).`]
  }
  if (row.synchronous_commit === 'local' || row.synchronous_commit === 'off') {
    return [`svc-webhooks: ${what}: synchronous_commit is ${String(row.synchronous_commit)}: commits do not wait for the synchronous standby, so a promote can lose what was answered 2xx. Set synchronous_commit to on or remote_apply.`]
  }
  return []
}
