/**
 * What every history engine shares: the receiver's and the worker's hooks and `replay`
 * (record.ts), so the core's request path only calls a method and carries none of it.
 */
import { recordProcessed, recordReceived, replayDelivery } from './record.js'
import { historySettings } from './text.js'
import type {
  HistoryEntry,
  HistoryOptions,
  HistoryPage,
  HistoryQuery,
  HistoryRecord,
  HistoryStats,
  KeptDelivery,
  ProcessedResult,
  ReceivedResult,
  RefusalCount,
  ReplayResult,
  ReplayRun,
  WebhookHistory,
} from './types.js'

/**
 * The base of every engine: extend it for a history of your own, implementing the storage
 * methods; the hooks and `replay` come with it.
 *
 * @example
 * class MyHistory extends HistoryBase { record(r) { ... } list(q) { ... } ... }
 */
export abstract class HistoryBase implements WebhookHistory {
  abstract readonly keepBodies: boolean
  abstract readonly redact: ((event: unknown) => unknown) | undefined
  abstract readonly maxBodyBytes: number
  abstract record(record: HistoryRecord): void
  abstract refused(code: string, claimedId: string | undefined, at: number): void
  abstract list(query?: HistoryQuery): Promise<HistoryPage>
  abstract get(id: string, endpoint?: string): Promise<HistoryEntry | undefined>
  abstract refusals(since?: number): Promise<RefusalCount[]>
  abstract flush(): Promise<void>
  abstract stats(): HistoryStats
  abstract size(): Promise<number>
  abstract close(): Promise<void>

  received(result: ReceivedResult, delivery: KeptDelivery | undefined, at: number, fixedEndpoint?: string): void {
    recordReceived(this, result, delivery, at, fixedEndpoint)
  }

  processed(result: ProcessedResult, at: number): void {
    recordProcessed(this, result, at)
  }

  replay(run: ReplayRun, id: string, endpoint?: string): Promise<ReplayResult> {
    return replayDelivery(this, run, id, endpoint)
  }
}

/**
 * The base of the library's own engines (MemoryHistory, and through BatchedHistory the Redis and
 * Postgres ones): the shared options, checked once by historySettings and kept here, so no engine
 * copies them field by field.
 */
export abstract class SettledHistory extends HistoryBase {
  readonly keepBodies: boolean
  readonly redact: ((event: unknown) => unknown) | undefined
  readonly maxBodyBytes: number
  readonly retentionMs: number
  readonly maxEntries: number
  protected readonly now: () => number
  protected readonly log: ((line: string) => void) | undefined

  /** `defaultMax` is the engine's `maxEntries` when the options give none. */
  constructor(options: HistoryOptions, defaultMax: number) {
    super()
    const s = historySettings(options, defaultMax)
    this.keepBodies = s.keepBodies
    this.redact = s.redact
    this.maxBodyBytes = s.maxBodyBytes
    this.retentionMs = s.retentionMs
    this.maxEntries = s.maxEntries
    this.now = s.now
    this.log = s.log
  }
}
