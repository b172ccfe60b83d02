/**
 * The history contract (DESIGN.md "History, replay and the console"): one entry per delivery id
 * and endpoint, written by the receiver and the inbox worker, read by `replay`, the console and
 * the CLI. Every engine (MemoryHistory, RedisHistory, PostgresHistory) merges a
 * {@link HistoryRecord} into the entry the same way (`mergeRecord` in merge.ts says how).
 */

/**
 * Where a delivery stands:
 * - `accepted`: in the durable inbox, not run yet;
 * - `processed`: its handler succeeded (on the request, in the worker or in a replay);
 * - `failed`: the receiver's handler threw (answered 500, the sender retries);
 * - `retrying`: the worker's handler failed, due again later;
 * - `dead`: the worker gave up: in the dead letters;
 * - `ignored`: no handler for its event type;
 * - `duplicate` / `in_flight` / `unavailable`: only ever the first thing known of an id whose
 *   earlier entry is gone (a resend after the retention, or history turned on meanwhile): they
 *   never replace what an entry already says.
 */
export type HistoryOutcome = 'accepted' | 'processed' | 'failed' | 'retrying' | 'dead' | 'ignored' | 'duplicate' | 'in_flight' | 'unavailable'

export const HISTORY_OUTCOMES: readonly HistoryOutcome[] = ['accepted', 'processed', 'failed', 'retrying', 'dead', 'ignored', 'duplicate', 'in_flight', 'unavailable']

/** One delivery as the history keeps it. Every string but the outcome is attacker-influenced: escape it before showing it. */
export interface HistoryEntry {
  /** `svc-webhook-id`, verified. */
  id: string
  /** The endpoint (dedupe namespace) it was received for. */
  endpoint: string
  eventType?: string
  /** First time it was seen, in milliseconds since the epoch. */
  receivedAt: number
  /** When its handler last succeeded. */
  processedAt?: number
  /** Last change. */
  updatedAt: number
  outcome: HistoryOutcome
  /** The last answer the sender got for it (the worker leaves the receiver's 202). */
  status?: number
  /** The answer code when not `processed` (`handler_failed`, `in_flight`, ...). */
  code?: string
  /** Handler runs, replays included. */
  attempts: number
  /** Times the sender delivered it, resends and retries included. */
  deliveries: number
  /** The last failure's error name, and its message capped and sanitized (see text.ts). */
  errorName?: string
  errorMessage?: string
  /** Replays run on purpose, and the last one's time. */
  replays: number
  replayedAt?: number
  /** Whether a body is kept (`keepBodies`). */
  hasBody: boolean
  /** The body as kept: the raw text, or the JSON of `redact(event)` when `bodyRedacted`. Only from `get()`. */
  body?: string
  bodyRedacted?: boolean
}

/**
 * One change to an entry, as the receiver and the worker send it. Engines apply it atomically:
 * `soft` sets the outcome only on a new entry; `attempts` sets the count, `addAttempt` adds one.
 */
export interface HistoryRecord {
  id: string
  endpoint: string
  /** When it happened, ms since the epoch. */
  at: number
  outcome: HistoryOutcome
  soft?: boolean
  eventType?: string
  status?: number
  code?: string
  attempts?: number
  addAttempt?: boolean
  /** The sender delivered it once more. */
  delivered?: boolean
  /** The handler succeeded now: sets `processedAt`. */
  processed?: boolean
  /** The failure; `null` clears the one kept. Undefined leaves it. */
  error?: { name: string; message: string } | null
  body?: string
  bodyRedacted?: boolean
  replay?: boolean
}

/** A `list` query. Times are milliseconds since the epoch, on `receivedAt`, `until` exclusive. */
export interface HistoryQuery {
  endpoint?: string
  outcome?: HistoryOutcome
  since?: number
  until?: number
  /** Entries per page, newest first. @default 50 (at most 500) */
  limit?: number
  /** From a previous page's `cursor`. */
  cursor?: string
}

/** A page of entries (without bodies), newest first; `cursor` reads the next one. */
export interface HistoryPage {
  entries: HistoryEntry[]
  cursor?: string
}

/** Refused (unverified) requests of one code in one window: counted, with a few of the ids as sent (unverified claims). */
export interface RefusalCount {
  /** Window start, ms since the epoch. */
  windowStart: number
  code: string
  count: number
  /** Up to {@link MAX_REFUSAL_IDS} ids as sent: a claim nobody signed, shown as such. */
  claimedIds: string[]
}

/** What the history itself went through: outages are counted here, never passed to the sender. */
export interface HistoryStats {
  /** Records written. */
  recorded: number
  /** Records lost to an engine outage or refusal. */
  failed: number
  /** Records dropped because too many were waiting for an engine that does not answer. */
  dropped: number
  /** Records waiting to be written. */
  pending: number
  /** The last outage's error name and time, if any. */
  lastError?: { name: string; at: number }
}

/**
 * What the receiver, the worker, the console and the CLI use. `record` and `refused` never throw
 * and never wait for the engine: an engine outage is counted in `stats()` and logged, never turned
 * into a different answer to the sender.
 */
export interface WebhookHistory {
  /** Whether entries keep bodies (and so can be replayed locally). */
  readonly keepBodies: boolean
  /** Turns an event into what is kept of it. Called by the recorder, never by the engine. */
  readonly redact: ((event: unknown) => unknown) | undefined
  /** Bodies larger than this are not kept. */
  readonly maxBodyBytes: number
  record(record: HistoryRecord): void
  /** Counts one refused request of `code`, with the id as sent (unverified) if any. */
  refused(code: string, claimedId: string | undefined, at: number): void
  list(query?: HistoryQuery): Promise<HistoryPage>
  /** The entry of `id` (on `endpoint`, or the latest of that id on any endpoint), body included. */
  get(id: string, endpoint?: string): Promise<HistoryEntry | undefined>
  /** Refusal counts, newest window first. */
  refusals(since?: number): Promise<RefusalCount[]>
  /** Waits until every record made so far is written (or failed). */
  flush(): Promise<void>
  stats(): HistoryStats
  /** Entries kept now (an estimate for the engines that trim in the background). */
  size(): Promise<number>
  /** Stops the background timers. */
  close(): Promise<void>
  /**
   * Called by the receiver once per request with its result (and the delivery, once verified):
   * makes the record or counts the refusal. Never throws. Engines get it from `HistoryBase`.
   */
  received(result: ReceivedResult, delivery: KeptDelivery | undefined, at: number, fixedEndpoint?: string): void
  /** Called by the worker once per run with its result. Never throws. */
  processed(result: ProcessedResult, at: number): void
  /** Runs a kept delivery through `handlers` again and records it (the receiver's and the worker's `replay`). */
  replay(run: ReplayRun, id: string, endpoint?: string): Promise<ReplayResult>
}

/** The parts of a receiver's `WebhookResult` a record needs. */
export interface ReceivedResult {
  outcome: string
  status: number
  code?: string
  id?: string
  eventType?: string
  endpoint?: string
  error?: unknown
}

/** The parts of a verified delivery a record keeps. */
export interface KeptDelivery {
  rawBody: Uint8Array
  event: unknown
}

/** The parts of an `InboxWorkerResult` a record needs. */
export interface ProcessedResult {
  outcome: string
  id: string
  endpoint: string
  eventType?: string
  attempts: number
  error?: unknown
}

/** What a replay runs with: the owner's handlers and clock. */
export interface ReplayRun {
  handlers: ReadonlyMap<string, (event: any, delivery: any) => unknown> | Readonly<Record<string, ((event: any, delivery: any) => unknown) | undefined>> | undefined
  now: () => number
  /** The longest a replayed handler may run. @default 300000 */
  timeoutMs?: number
}

/** How a replay ended. */
export interface ReplayResult {
  id: string
  endpoint: string
  outcome: 'processed' | 'failed'
  /** The handler's error, when it failed (also kept, sanitized, in the entry). */
  error?: unknown
  durationMs: number
}

/** Options every history engine takes. */
export interface HistoryOptions {
  /**
   * How long an entry is kept after its last change, in milliseconds.
   * @default 604800000 (7 days)
   */
  retentionMs?: number
  /**
   * Most entries kept: past it the oldest go first.
   * @default 10000 (MemoryHistory), 1000000 (RedisHistory, PostgresHistory)
   */
  maxEntries?: number
  /**
   * Keep each delivery's body, so it can be replayed and (with the console's `showBodies`) shown.
   * @default false
   */
  keepBodies?: boolean
  /**
   * With `keepBodies`: what of the event is kept, e.g. removing personal data. A replay then runs
   * the handler on what `redact` returned.
   * @default none (the raw body is kept as received)
   */
  redact?: (event: unknown) => unknown
  /**
   * Bodies larger than this are not kept (the entry says so).
   * @default 65536
   */
  maxBodyBytes?: number
  /**
   * Where an outage's line goes (once per minute at most): a function taking one line, or false.
   * @default console.warn
   */
  log?: ((line: string) => void) | false
  /** The clock (tests). @default Date.now */
  now?: () => number
}

export const DEFAULT_HISTORY_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
/** Refusal windows: one minute each, kept for a day. */
export const REFUSAL_WINDOW_MS = 60_000
export const REFUSAL_RETENTION_MS = 24 * 60 * 60 * 1000
export const MAX_REFUSAL_IDS = 10
/** Distinct refusal codes counted per window: the answers table has fewer, so a made-up one cannot grow it. */
export const MAX_REFUSAL_CODES = 40
export const DEFAULT_PAGE = 50
export const MAX_PAGE = 500
