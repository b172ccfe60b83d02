/**
 * The write path of the engines that talk to a server (Redis, Postgres). A record is queued and
 * written with the others of the next 20 ms in one round trip, off the request path: the delivery's
 * answer never waits for the history, so an outage cannot delay or change it. A queue that keeps
 * growing (the server is down) is capped: past it records are dropped and counted. A failed write
 * is counted and logged once a minute, never retried in a loop.
 */
import { SettledHistory } from './base.js'
import type { HistoryOptions, HistoryRecord, HistoryStats, RefusalCount } from './types.js'
import { RefusalTally } from './refusals.js'

/** Most records waiting while the server does not answer. */
const MAX_PENDING = 10_000
/** Records per round trip. */
const BATCH = 500
const LOG_EVERY_MS = 60_000
const REFUSALS_EVERY_MS = 1000

export type WriteBatch = (records: HistoryRecord[], refusals: RefusalCount[]) => Promise<void>

export class Batcher {
  private pending: HistoryRecord[] = []
  private readonly tally = new RefusalTally()
  private writing: Promise<void> | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private loggedAt = -Infinity
  /** Whether the timer set waits for refusal counts only. */
  private countsOnly = false
  readonly counts: HistoryStats = { recorded: 0, failed: 0, dropped: 0, pending: 0 }

  constructor(
    private readonly write: WriteBatch,
    private readonly name: string,
    private readonly log: ((line: string) => void) | undefined,
    private readonly now: () => number,
    private readonly delayMs = 20,
  ) {}

  push(record: HistoryRecord): void {
    if (this.pending.length >= MAX_PENDING) {
      this.counts.dropped++
      this.say(`svc-webhooks: ${this.name}: ${MAX_PENDING} records wait to be written (the server is slow or does not answer); newer ones are dropped (counted in stats().dropped). Deliveries are answered as usual.`)
      return
    }
    this.pending.push(record)
    this.schedule()
  }

  refused(code: string, claimedId: string | undefined, at: number): void {
    this.tally.add(code, claimedId, at)
    this.schedule()
  }

  private schedule(): void {
    if (this.writing !== undefined) return
    if (this.timer !== undefined) {
      // Records were waiting only behind refusal counts: they go now, not after the counts' second.
      if (!this.countsOnly || this.pending.length === 0) return
      clearTimeout(this.timer)
    }
    // Counts alone wait a second: a flood of refused requests costs one write a second, not one per batch.
    this.countsOnly = this.pending.length === 0
    this.timer = setTimeout(() => {
      this.timer = undefined
      void this.drain()
    }, this.countsOnly ? REFUSALS_EVERY_MS : this.delayMs)
    ;(this.timer as { unref?: () => void }).unref?.()
  }

  /**
   * Writes a batch, and the next at once while a whole one waits (or, with `all`, until nothing
   * waits); one write at a time. Records that came in during a write otherwise wait for the next
   * timer: written at once, they made a batch of what one round trip gathers, a few dozen records,
   * and each batch costs the receiver and the server about as much again as its records.
   */
  private drain(all = false): Promise<void> {
    if (this.writing) return this.writing
    this.writing = (async () => {
      // Bounded: each pass takes at least one record or the tally, and nothing is added back.
      for (let pass = 0; pass < MAX_PENDING && (this.pending.length > 0 || !this.tally.empty); pass++) {
        if (pass > 0 && !all && this.pending.length < BATCH) break
        const records = this.pending.length <= BATCH ? this.pending : this.pending.slice(0, BATCH)
        this.pending = this.pending.length <= BATCH ? [] : this.pending.slice(BATCH)
        const refusals = this.tally.drain()
        try {
          await this.write(records, refusals)
          this.counts.recorded += records.length
        } catch (error) {
          this.counts.failed += records.length
          const name = error instanceof Error ? String(error.name).slice(0, 60) : 'Error'
          this.counts.lastError = { name, at: this.now() }
          this.say(`svc-webhooks: ${this.name} could not write ${records.length} record(s) (${name}); they are lost from the history, counted in stats().failed. Deliveries are answered as usual.`)
        }
      }
    })().finally(() => {
      this.writing = undefined
      if (this.pending.length > 0 || !this.tally.empty) this.schedule()
    })
    return this.writing
  }

  private say(line: string): void {
    const at = this.now()
    if (at - this.loggedAt < LOG_EVERY_MS) return
    this.loggedAt = at
    this.log?.(line)
  }

  async flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer)
      this.timer = undefined
    }
    // Bounded: a drain empties the queue; records pushed meanwhile get one more.
    for (let i = 0; i < 3 && (this.writing || this.pending.length > 0 || !this.tally.empty); i++) await this.drain(true)
  }

  stats(): HistoryStats {
    return { ...this.counts, pending: this.pending.length }
  }

  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}

/**
 * The base of the engines that write through a {@link Batcher} (Redis, Postgres): their
 * recording, refusals, `flush`, `stats` and `close` are the batcher's, the same for each (their
 * settings are SettledHistory's). Kept apart from HistoryBase so a history of one's own, and the
 * core that only calls its hooks, carry none of it.
 */
export abstract class BatchedHistory extends SettledHistory {
  readonly timeoutMs: number
  protected readonly batcher: Batcher

  /** `name` is the engine's, for its log lines; `options` are checked here, the engine's own before. */
  constructor(name: string, options: HistoryOptions, timeoutMs: number) {
    super(options, 1_000_000)
    this.timeoutMs = timeoutMs
    this.batcher = new Batcher((records, refusals) => this.write(records, refusals), name, this.log, this.now)
  }

  /** Writes one batch: the records and the refusal counts since the last. */
  protected abstract write(records: HistoryRecord[], refusals: RefusalCount[]): Promise<void>

  record(record: HistoryRecord): void {
    this.batcher.push(record)
  }

  refused(code: string, claimedId: string | undefined, at: number): void {
    this.batcher.refused(code, claimedId, at)
  }

  flush(): Promise<void> {
    return this.batcher.flush()
  }

  stats(): HistoryStats {
    return this.batcher.stats()
  }

  async close(): Promise<void> {
    await this.batcher.flush()
    this.batcher.close()
  }
}
