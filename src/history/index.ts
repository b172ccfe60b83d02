/** The history's public names in the core (`svc-webhooks`); the server engines are in svc-webhooks/redis and svc-webhooks/postgres. */
export { MemoryHistory } from './memory.js'
export { ReplayError, type ReplayErrorCode, type ReplayResult } from './record.js'
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
  type WebhookHistory,
} from './types.js'
