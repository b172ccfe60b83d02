/**
 * Why BullMQ, pg-boss and the Cloudflare Queues consumer refuse `ordering` (DESIGN.md "Order
 * within a conversation"): apart from src/inbox/ordering.ts so the core bundle, which never
 * refuses, does not carry these sentences. Each is refused at construction with its reason,
 * never run unordered in silence. One constant per engine, not one table: a Worker that bundles
 * the Queues consumer carries only its own reason.
 */
export const BULLMQ_ORDERING_REFUSED =
  'BullMQ keeps order per key only with BullMQ Pro groups; its open-source Queue hands jobs to any free worker in the order they were added, so two messages of one conversation can run at once. Use RedisInbox with createInboxWorker({ ordering: byConversation }) on the same Redis.'

export const PG_BOSS_ORDERING_REFUSED =
  "pg-boss 12's key_strict_fifo policy runs a key's jobs one at a time but in the order they were inserted (created_on), not in message.created_at order, and the sender's retries reorder deliveries before they arrive; a failed job also holds its key until it is deleted, where a dead letter must release it. Use PostgresInbox with createInboxWorker({ ordering: byConversation }) on the same database."

export const QUEUES_ORDERING_REFUSED =
  'a Queue hands batches to consumer invocations that run concurrently, in no order by key and with no lock shared between them, and retries a message after later ones. Append to RedisInbox or PostgresInbox (Hyperdrive) and run createInboxWorker({ ordering: byConversation }) where a process can stay up.'

/** Throws why `engine`'s processor cannot keep `ordering` (`reason`, one of the above), when it was asked for. */
export function refuseOrdering(engine: string, reason: string, ordering: unknown): void {
  if (ordering !== undefined) throw new TypeError(`svc-webhooks: \`ordering\` is not available on ${engine}: ${reason}`)
}
