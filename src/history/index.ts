/** `svc-webhooks/history`: `MemoryHistory`, `ReplayError` and the history's types; RedisHistory and PostgresHistory are in svc-webhooks/redis and svc-webhooks/postgres. */
export { MemoryHistory } from './memory.js'
export { ReplayError, type ReplayErrorCode } from './record.js'
export { HistoryBase } from './base.js'
export { sanitizeMessage } from './text.js'
export {
  DEFAULT_HISTORY_RETENTION_MS,
  HISTORY_OUTCOMES,
  type HistoryEntry,
  type HistoryOptions,
  type HistoryOutcome,
  type HistoryPage,
  type HistoryQuery,
  type HistoryRecord,
  type HistoryStats,
  type RefusalCount,
  type ReplayResult,
  type ReplayRun,
  type ReceivedResult,
  type ProcessedResult,
  type KeptDelivery,
  type WebhookHistory,
} from './types.js'
