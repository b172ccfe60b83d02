/**
 * `PostgresSecretSource` (exported by svc-webhooks/postgres): an endpoint's secret state in one
 * row of a small table (name, state as JSON text, updated_at), read by every receiver process and
 * upserted by a rotation. The table is created on first use unless `createTable: false`.
 */
import type { SecretSource, SecretState, SecretWriteCondition } from '../secrets/index.js'
import { positiveOption } from '../option-checks.js'
import { withDeadline } from '../clients/deadline.js'
import { isPostgresRefusal, quoteTable, serializedDdl, type PostgresQueryable } from '../clients/postgres.js'
import { secretStatements, type SecretStatements } from './postgres-sql.js'
import { expectedVersion, parseState, sourceError, stateText } from './source-state.js'

/** Options of {@link PostgresSecretSource}. */
export interface PostgresSecretSourceOptions {
  /** A `pg` Pool: it opens fresh connections after the database restarts. */
  pool: PostgresQueryable
  /**
   * Not accepted: a `pg.Client` never reconnects after a database restart, so every later read
   * would fail and a rotation would never be seen. Pass `pool`.
   * @deprecated A TypeError at construction.
   */
  client?: never
  /** The row's name: one per endpoint, e.g. its id. */
  name: string
  /**
   * The table, optionally schema-qualified (`schema.table`).
   * @default 'svc_webhooks_secrets'
   */
  table?: string
  /**
   * Create the table (`CREATE TABLE IF NOT EXISTS`) before the first read or write. Turn it off
   * when migrations create it (the statement is `createSecretTableSql()`) or the role may not.
   * @default true
   */
  createTable?: boolean
  /**
   * Longest wait for one read or write, retries included. Below the receiver's own read deadline
   * (`secretReadTimeoutMs`, 2 s), so the reason for a failure reaches its log line.
   * @default 1500
   */
  timeoutMs?: number
}

/**
 * Two processes creating the table at once: what the loser meets is a success. Which error it is
 * depends on when the winner's catalog rows became visible to it: a unique violation on pg_type
 * (23505), "relation already exists" (42P07) or "type already exists" (42710).
 */
const ALREADY_CREATED = new Set(['23505', '42P07', '42710'])

/**
 * A secret source in Postgres: `read()` selects the row named `name` with its `version`,
 * `write()` upserts it with the next version; `write(state, { version })` changes it only where
 * the row still has that version (`UPDATE ... WHERE version = $3`, one statement under the row
 * lock) and resolves whether it did. A row that does not exist is a failed read (503, the sender
 * retries): write the secret before pointing receivers at it. A table made by an earlier version
 * gets its `version` column on first use (with `createTable: false`, run the `ALTER TABLE` the
 * error names).
 *
 * @example
 * import pg from 'pg'
 * import { PostgresSecretSource } from 'svc-webhooks/postgres'
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * const source = new PostgresSecretSource({ pool, name: 'ep_123' })
 * await source.write({ secrets: [process.env.SVC_WEBHOOK_SECRET!] }) // once, when the endpoint is set up
 * const receiver = createWebhookReceiver({ secret: source, on })
 */
export class PostgresSecretSource implements SecretSource {
  readonly name: string
  readonly table: string
  readonly timeoutMs: number
  private readonly db: PostgresQueryable
  private readonly sql: SecretStatements
  private created: Promise<void> | undefined

  constructor({ pool, client, name, table = 'svc_webhooks_secrets', createTable = true, timeoutMs = 1500 }: PostgresSecretSourceOptions) {
    if (client !== undefined) {
      throw new TypeError('svc-webhooks: PostgresSecretSource takes `pool` (new pg.Pool(...)), not `client`: a pg.Client does not reconnect after the database restarts. For one connection pass new pg.Pool({ ..., max: 1 }).')
    }
    const db = pool
    if (typeof db?.query !== 'function') throw new TypeError('svc-webhooks: PostgresSecretSource needs `pool` (new pg.Pool(...)).')
    if (typeof name !== 'string' || name.length === 0) throw new TypeError('svc-webhooks: PostgresSecretSource `name` must be a non-empty string.')
    if (typeof createTable !== 'boolean') throw new TypeError('svc-webhooks: PostgresSecretSource `createTable` must be a boolean.')
    positiveOption(timeoutMs, 'PostgresSecretSource `timeoutMs`')
    const t = quoteTable(table, 'PostgresSecretSource')
    this.db = db
    this.name = name
    this.table = table
    this.timeoutMs = timeoutMs
    this.sql = secretStatements(t, table)
    if (!createTable) this.created = Promise.resolve()
  }

  /**
   * Creates the table if it does not exist (done on first use unless `createTable: false`).
   *
   * @example
   * await new PostgresSecretSource({ pool, name: 'ep_123' }).ensureTable()
   */
  ensureTable(): Promise<void> {
    // Another process creating or altering the table at the same moment is not a failure.
    const raced = (error: unknown): void => {
      if (!ALREADY_CREATED.has(String((error as { code?: unknown } | null)?.code))) throw error
    }
    // A table made before conditional writes gets its version column (a no-op when it is there).
    // One transaction under the table's DDL lock. A process of an earlier version takes no lock
    // and can still race it: then the table is there, and the statements run once more.
    const ddl = serializedDdl(this.table, `${this.sql.create};\n${this.sql.migrate}`)
    const created = this.db.query(ddl).then(
      () => undefined,
      (error: unknown) => {
        raced(error)
        return this.db.query(ddl).then(() => undefined)
      },
    )
    this.created = created
    // A failure is tried again by the next read or write.
    created.catch(() => (this.created === created ? (this.created = undefined) : undefined))
    return created
  }

  async read(): Promise<SecretState> {
    const { rows } = await this.query('read', this.sql.read, [this.name])
    const row = rows[0] as { state?: unknown; version?: unknown } | undefined
    if (typeof row?.state !== 'string') {
      throw sourceError(`PostgresSecretSource: no row named "${this.name}" in ${this.table}; write the endpoint's secret to it (source.write({ secrets: [...] })).`, undefined, true)
    }
    const state = parseState(row.state)
    const version = Number(row.version ?? 0)
    // A value that is not a state is passed on as is, for the receiver to refuse without quoting it.
    if (typeof state === 'object' && state !== null && !Array.isArray(state)) return { ...state, version }
    return state
  }

  /** Stores `state`; with `condition`, only if the row's version is still `condition.version`. Resolves whether it wrote. */
  async write(state: SecretState, condition?: SecretWriteCondition): Promise<boolean> {
    const text = stateText(state, 'PostgresSecretSource')
    const expected = expectedVersion(condition, 'PostgresSecretSource')
    const [sql, values] =
      expected === undefined ? [this.sql.write, [this.name, text]]
      : expected === 0 ? [this.sql.writeIfNew, [this.name, text]]
      : [this.sql.writeIf, [this.name, text, expected]]
    const result = (await this.query('write', sql, values)) as { rowCount?: number | null }
    return expected === undefined || (result.rowCount ?? 0) > 0
  }

  private query(what: 'read' | 'write', text: string, values: unknown[]): Promise<{ rows: unknown[] }> {
    return withDeadline(
      `PostgresSecretSource.${what}`,
      this.timeoutMs,
      async () => {
        await (this.created ?? this.ensureTable())
        return this.db.query(text, values)
      },
      // Only a summary of the client's error is kept: a write's values are the secrets.
      {
        refused: isPostgresRefusal,
        fail: (_kind, message, summary) => {
          const hint = /column "version" does not exist/.test(summary?.message ?? '') ? ` The table predates conditional writes: run ${this.sql.migrate}.` : ''
          return sourceError(`${message.replace(/^svc-webhooks: /, '')}${hint}`, summary)
        },
      },
    )
  }
}
