/**
 * Refused requests, counted per code and one-minute window with a few of the ids as sent. A
 * refused request proves nothing (anyone can send one), so nothing of it becomes an entry: a flood
 * of forged requests adds to a count, and memory stays bounded by the windows kept, the codes
 * counted per window and the ids shown per code.
 */
import { MAX_REFUSAL_CODES, MAX_REFUSAL_IDS, REFUSAL_RETENTION_MS, REFUSAL_WINDOW_MS, type RefusalCount } from './types.js'

const OTHER = 'other'

export class RefusalTally {
  private readonly windows = new Map<number, Map<string, RefusalCount>>()

  add(code: string, claimedId: string | undefined, at: number, count = 1, ids?: readonly string[]): void {
    const start = Math.floor(at / REFUSAL_WINDOW_MS) * REFUSAL_WINDOW_MS
    let window = this.windows.get(start)
    if (window === undefined) {
      window = new Map()
      this.windows.set(start, window)
      this.prune(at)
    }
    const key = window.has(code) || window.size < MAX_REFUSAL_CODES ? code : OTHER
    let row = window.get(key)
    if (row === undefined) window.set(key, (row = { windowStart: start, code: key, count: 0, claimedIds: [] }))
    row.count += count
    for (const id of ids ?? (claimedId === undefined ? [] : [claimedId])) {
      if (row.claimedIds.length < MAX_REFUSAL_IDS && !row.claimedIds.includes(id)) row.claimedIds.push(id)
    }
  }

  /** Windows older than the retention go; the map never holds more than a day of minutes. */
  private prune(at: number): void {
    for (const start of this.windows.keys()) {
      if (start >= at - REFUSAL_RETENTION_MS && this.windows.size <= REFUSAL_RETENTION_MS / REFUSAL_WINDOW_MS + 1) break
      this.windows.delete(start)
    }
  }

  list(since = 0): RefusalCount[] {
    const out: RefusalCount[] = []
    for (const window of this.windows.values()) for (const row of window.values()) if (row.windowStart >= since) out.push({ ...row, claimedIds: [...row.claimedIds] })
    return out.sort((a, b) => b.windowStart - a.windowStart || b.count - a.count)
  }

  /** Everything counted so far, emptied: what an engine writes in its next batch. */
  drain(): RefusalCount[] {
    const out = this.list()
    this.windows.clear()
    return out
  }

  get empty(): boolean {
    return this.windows.size === 0
  }
}
