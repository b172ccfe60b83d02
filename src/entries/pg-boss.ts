/**
 * `svc-webhooks/pg-boss`: pg-boss as the durable inbox, `PgBossInbox` to append and
 * `createPgBossHandler` to run the handlers (src/engines/pg-boss.ts). `pg-boss` is an optional
 * peer: the engine talks to the instance it is given.
 */
export * from '../engines/pg-boss.js'
