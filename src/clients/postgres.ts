/**
 * What PostgresStore, PostgresInbox and PostgresHistory share: the client shape they take (a `pg`
 * Pool or Client, or anything with `query(text, values)`; `pg` is not a dependency), their
 * statements prepared through `pg`, and the quoting of a table option. Not a public entry: `svc-webhooks/postgres` re-exports the {@link PostgresQueryable} type.
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
 * `ddl`, the statements that create or upgrade `table` (a name `quoteTable` accepted), after a
 * transaction-level advisory lock named after the table, to send as one query: the statements of
 * one query run as one transaction, so processes that call `ensureTable()` at the same moment
 * create the table one after the other, and each after the first finds it there. Racing, two
 * `CREATE ... IF NOT EXISTS` can both miss the other's uncommitted table, and the loser fails
 * with a unique violation on pg_type, 42P07 or 42710, by timing.
 *
 * @example
 * await pool.query(serializedDdl('svc_webhooks_deliveries', createTableSql()))
 */
export function serializedDdl(table: string, ddl: string): string {
  return `SELECT pg_advisory_xact_lock(hashtext('svc-webhooks ddl ${table}'));\n${ddl}`
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

/** The `pg` query config of a named (prepared) statement. */
interface NamedStatement {
  name: string
  text: string
  values: unknown[]
}

/** What `pg`'s Pool and Client take besides `query(text, values)`: a query config with a name. */
interface NamingQueryable {
  query(statement: NamedStatement): Promise<{ rows: unknown[] }>
}

/**
 * SQLSTATEs that say a prepared statement is not what the client believes, all raised before the
 * statement ran: not prepared on this server connection (26000) or prepared there already (42P05),
 * what a pooler in transaction mode does by handing the client another server connection
 * (PgBouncer before 1.21, or without `max_prepared_statements`); a result that changed under it
 * (0A000, "cached plan must not change result type", after an upgrade's DDL).
 */
const NOT_AS_PREPARED = new Set(['26000', '42P05', '0A000'])

/** Whether `error` says a named statement is not what the client believes (nothing ran). */
export function isNotAsPrepared(error: unknown): boolean {
  return NOT_AS_PREPARED.has((error as { code?: unknown } | null)?.code as string)
}

/**
 * A statement's name for the server: `svc_` and 16 hex digits of two FNV-1a hashes of its text,
 * so one text has one name on every connection, and two texts (two tables, two versions) sharing
 * a name would take a 64-bit collision. `pg` prepares a named statement once per connection and
 * then only binds it: parsing, analysis and planning, which cost the server more than running
 * most of these statements, happen once per connection instead of on every call.
 */
export function statementName(text: string): string {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ text.length
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x0100019d)
  }
  return `svc_${(a >>> 0).toString(16).padStart(8, '0')}${(b >>> 0).toString(16).padStart(8, '0')}`
}

/**
 * Runs the statements of one store or inbox as named (prepared) statements through a `pg` Pool or
 * Client, until the database says a name is not what the client believes (a pooler in
 * transaction mode, an upgrade's DDL): from then on, every statement goes unnamed, and the one
 * that met it is sent again unnamed (nothing ran). For statements outside a transaction: inside
 * one, such an error would abort the whole transaction.
 *
 * @example
 * const statements = new PreparedStatements(pool)
 * const { rows } = await statements.query(pool, sql.take, [10, 30_000])
 */
export class PreparedStatements {
  private named: boolean
  private readonly names = new Map<string, string>()

  /**
   * `db`: what the statements go through. Only a `pg` Pool (it carries its `Client` class) or
   * Client (`escapeLiteral`) is given a query config; anything else with `query(text, values)`
   * gets exactly that, unnamed.
   */
  constructor(db: PostgresQueryable) {
    const like = db as { Client?: unknown; escapeLiteral?: unknown }
    this.named = typeof like.Client === 'function' || typeof like.escapeLiteral === 'function'
  }

  query(db: PostgresQueryable, text: string, values: unknown[]): Promise<{ rows: unknown[] }> {
    if (!this.named) return db.query(text, values)
    let name = this.names.get(text)
    if (name === undefined) this.names.set(text, (name = statementName(text)))
    return (db as unknown as NamingQueryable).query({ name, text, values }).catch((error: unknown) => {
      if (!isNotAsPrepared(error)) throw error
      this.named = false
      return db.query(text, values)
    })
  }
}
