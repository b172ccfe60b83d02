/**
 * `MemoryHistory`: the history in the process's memory, for one process, tests and demos (gone
 * at restart). Entries are kept in arrival order; the oldest go first past `maxEntries` or the
 * retention, trimmed as new ones come, so it needs no timer.
 */
import { SettledHistory } from './base.js'
import { memberOf } from './keys.js'
import { mergeRecord } from './merge.js'
import { RefusalTally } from './refusals.js'
import { decodeCursor, encodeCursor, pageOf } from './text.js'
import type { HistoryEntry, HistoryOptions, HistoryPage, HistoryQuery, HistoryRecord, HistoryStats, RefusalCount } from './types.js'

const withoutBody = (entry: HistoryEntry): HistoryEntry => {
  const { body: _body, ...rest } = entry
  return rest
}

/**
 * History in memory: bounded by `maxEntries` (default 10,000) and the retention (default 7 days).
 *
 * @example
 * const history = new MemoryHistory({ keepBodies: true })
 * const receiver = createWebhookReceiver({ secret, on, history })
 * await history.list({ outcome: 'failed' })
 */
export class MemoryHistory extends SettledHistory {
  /**
   * Each id's newest entry: one lookup by the id alone, the string the record carries, for the
   * common case of one endpoint per id. An entry of the same id made earlier for another endpoint
   * moves to `others`, by member (keys.ts).
   */
  private readonly byId = new Map<string, HistoryEntry>()
  private readonly others = new Map<string, HistoryEntry>()
  /** Entries in arrival order from `head`; `base` is the sequence number of `order[0]`. Only trim removes one, from the front. */
  private order: HistoryEntry[] = []
  private head = 0
  private base = 0
  private readonly tally = new RefusalTally()
  private readonly counts: HistoryStats = { recorded: 0, failed: 0, dropped: 0, pending: 0 }

  constructor(options: HistoryOptions = {}) {
    super(options, 10_000)
  }

  record(record: HistoryRecord): void {
    const newest = this.byId.get(record.id)
    let found = newest
    if (newest !== undefined && newest.endpoint !== record.endpoint) found = this.others.get(memberOf(record.endpoint, record.id))
    if (found) mergeRecord(found, record)
    else {
      const entry = mergeRecord(undefined, record)
      if (newest !== undefined) this.others.set(memberOf(newest.endpoint, newest.id), newest)
      this.byId.set(record.id, entry)
      this.order.push(entry)
      this.trim()
    }
    this.counts.recorded++
  }

  refused(code: string, claimedId: string | undefined, at: number): void {
    this.tally.add(code, claimedId, at)
  }

  /**
   * Drops the oldest past the bound or the retention; at most what was added plus the expired,
   * each once. An id's newest entry is its last to go (the others arrived before it).
   */
  private trim(): void {
    const oldest = this.now() - this.retentionMs
    while (this.head < this.order.length) {
      const entry = this.order[this.head]!
      if (this.order.length - this.head <= this.maxEntries && entry.updatedAt >= oldest) break
      if (this.byId.get(entry.id) === entry) this.byId.delete(entry.id)
      else this.others.delete(memberOf(entry.endpoint, entry.id))
      this.head++
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head)
      this.base += this.head
      this.head = 0
    }
  }

  async list(query: HistoryQuery = {}): Promise<HistoryPage> {
    const { limit, since, until } = pageOf(query)
    const after = decodeCursor(query.cursor)
    let index = this.order.length - 1
    if (after !== undefined) index = Math.min(index, Number(after[0]) - this.base - 1)
    const entries: HistoryEntry[] = []
    for (; index >= this.head; index--) {
      const e = this.order[index]!
      if (e.receivedAt < since || e.receivedAt >= until) continue
      if (query.endpoint !== undefined && e.endpoint !== query.endpoint) continue
      if (query.outcome !== undefined && e.outcome !== query.outcome) continue
      entries.push(withoutBody(e))
      if (entries.length === limit) break
    }
    const more = entries.length === limit && index > this.head
    return more ? { entries, cursor: encodeCursor([this.base + index]) } : { entries }
  }

  async get(id: string, endpoint?: string): Promise<HistoryEntry | undefined> {
    let found = this.byId.get(id)
    if (found !== undefined && endpoint !== undefined && found.endpoint !== endpoint) found = this.others.get(memberOf(endpoint, id))
    return found ? { ...found } : undefined
  }

  async refusals(since?: number): Promise<RefusalCount[]> {
    return this.tally.list(since)
  }

  async flush(): Promise<void> {}

  stats(): HistoryStats {
    return { ...this.counts }
  }

  async size(): Promise<number> {
    return this.order.length - this.head
  }

  async close(): Promise<void> {}
}
