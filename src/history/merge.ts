/**
 * How a {@link HistoryRecord} changes an entry, written once in JavaScript for MemoryHistory; the
 * Redis script and the Postgres upsert apply the same rules (redis-scripts.ts, postgres-sql.ts),
 * and RedisHistory builds a record's entry alone the same way (`stored` in redis.ts).
 */
import type { HistoryEntry, HistoryRecord } from './types.js'

export function mergeRecord(entry: HistoryEntry | undefined, r: HistoryRecord): HistoryEntry {
  const e: HistoryEntry = entry ?? {
    id: r.id,
    endpoint: r.endpoint,
    receivedAt: r.at,
    updatedAt: r.at,
    outcome: r.outcome,
    attempts: 0,
    deliveries: 0,
    replays: 0,
    hasBody: false,
  }
  // Records of several processes can land out of order (the worker's result before the
  // receiver's batch): a late one never replaces a newer outcome.
  const late = entry !== undefined && r.at < e.updatedAt
  if (r.at < e.receivedAt) e.receivedAt = r.at
  e.updatedAt = Math.max(e.updatedAt, r.at)
  if (r.eventType !== undefined) e.eventType = r.eventType
  if (r.delivered) e.deliveries++
  if (entry === undefined || (!r.soft && !late)) {
    e.outcome = r.outcome
    if (r.status !== undefined) e.status = r.status
    if (r.code !== undefined) e.code = r.code
    else if (r.status !== undefined) delete e.code
  }
  if (r.attempts !== undefined) e.attempts = r.attempts
  if (r.addAttempt) e.attempts++
  if (r.processed) e.processedAt = r.at
  if (r.error === null) {
    delete e.errorName
    delete e.errorMessage
  } else if (r.error !== undefined) {
    e.errorName = r.error.name
    e.errorMessage = r.error.message
  }
  if (r.body !== undefined) {
    e.body = r.body
    e.hasBody = true
    if (r.bodyRedacted) e.bodyRedacted = true
    else delete e.bodyRedacted
  }
  if (r.replay) {
    e.replays++
    e.replayedAt = r.at
  }
  return e
}
