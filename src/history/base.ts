/**
 * What every history engine shares: the receiver's and the worker's hooks and `replay`
 * (record.ts), so the core's request path only calls a method and carries none of it.
 */
import { recordProcessed, recordReceived, replayDelivery } from './record.js'
import type {
  HistoryEntry,
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
