// @ts-check
// What the durable engines (RedisInbox, PostgresInbox) can be tested for, in one place for the
// worker's fault tests and the inbox soak.

/**
 * Whether RedisInbox and PostgresInbox count hand-outs at take (`InboxEntry.takes` incremented
 * by the take itself). The worker's stalled checks (a poison delivery that crashes its process
 * goes to the dead letters) need it; while it is false they run on MemoryInbox only, and the
 * soak sends no poison delivery.
 */
export const ENGINES_COUNT_TAKES = false
