/**
 * `svc-webhooks/postgres`, for receivers that already run on Postgres: `PostgresStore`, the
 * idempotency store (src/stores/postgres.ts), `PostgresInbox`, the durable inbox
 * (src/inbox/postgres.ts), and `PostgresSecretSource`, the endpoint's secrets shared by every
 * process (src/stores/postgres-secret-source.ts). Each takes a `pg` Pool; `pg` is not a
 * dependency (src/clients/postgres.ts). The `create*Sql` functions give the tables' statements
 * for your migrations, and `migrateSecretTableSql` the change an earlier version's secrets table needs.
 */
export { PostgresStore, type PostgresStoreOptions } from '../stores/postgres.js'
export { createSecretTableSql, createTableSql, migrateSecretTableSql } from '../stores/postgres-sql.js'
export type { PostgresQueryable } from '../clients/postgres.js'
export { PostgresInbox, createInboxTableSql, type PostgresInboxOptions } from '../inbox/postgres.js'
export { PostgresSecretSource, type PostgresSecretSourceOptions } from '../stores/postgres-secret-source.js'
export { PostgresHistory, createHistoryTableSql, type PostgresHistoryOptions } from '../history/postgres.js'
export type { MaintenanceOptions, MaintenanceRound } from '../clients/postgres-maintenance.js'
