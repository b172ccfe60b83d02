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
