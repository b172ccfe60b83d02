/**
 * PostgresInbox's ordering and flow control: the calls of src/contracts/ordering.ts over the
 * statements of src/inbox/postgres-order-sql.ts. Kept apart from the inbox class, which hands it
 * its deadline-bound runner and its row reader.
 */
import { InboxError, type InboxEntry } from '../contracts/inbox.js'
import type { Admission, OrderedEntry, OrderedTake, OrderedTakeOptions, PauseState, Placement, WorkerMode } from '../contracts/ordering.js'
import { orderStatements, type OrderStatements } from './postgres-order-sql.js'
import { tokenWaitMs } from './token-bucket.js'

/** Unplaced deliveries handed out to be placed per ordered take. */
const PLACE_BATCH = 200
/**
 * Filed deliveries an ordered take places itself, at most: a backlog larger than that leaves the
 * take busy (no head yet), and the worker's next take places the next batch.
 */
const FILE_BATCH = 2000
/**
 * Keys locked per ordered take beyond the heads wanted: a ready key may turn out busy (its head
 * still running) or not due, and the take should still fill the worker's free slots.
 */
const KEY_SLACK = 2

type Rows = { rows: unknown[] }

export interface PostgresOrderHost {
  table: string
  /** Runs one operation within the inbox's deadline, its failure an InboxError. */
  run<T>(what: string, attempt: () => Promise<T>): Promise<T>
  query(text: string, values: unknown[]): Promise<Rows>
  /** A row of the inbox's columns as an entry. */
  entryOf(row: unknown): InboxEntry
  /** How long a completed delivery's keys are kept (the inbox's `retentionMs`). */
  retentionMs: number
}

interface PauseRow {
  paused: boolean
  paused_by: string | null
  since_ms: number
  version: string | number
}

export class PostgresOrder {
  private readonly sql: OrderStatements

  constructor(private readonly host: PostgresOrderHost) {
    this.sql = orderStatements(host.table)
  }

  async takeOrdered(max: number, visibilityMs: number, { placeLeaseMs, filed }: OrderedTakeOptions): Promise<OrderedTake> {
    const wanted = Math.max(0, Math.floor(max))
    // No poke needed: whatever frees a key (complete, retry, bury, a hand-back) wakes its row in
    // the same statement, through the deliveries table's triggers. One round trip: the take's
    // statements run in a function (postgres-order-sql.ts says why).
    const values = [PLACE_BATCH, Math.max(1, Math.ceil(placeLeaseMs)), wanted === 0 ? 0 : wanted + KEY_SLACK, wanted, Math.max(1, Math.ceil(visibilityMs))]
    // Without `filed`, the function of the version before filing: a worker whose ordering is not
    // its inbox's runs on tables not upgraded yet too.
    const { rows } = await this.host.run('takeOrdered', () =>
      filed ? this.host.query(this.sql.takeFiled, [...values, FILE_BATCH, filed.strict]) : this.host.query(this.sql.take, values),
    )
    const taken = rows as ({ kind: string; order_key: string; late: boolean | null } & PlacingRow)[]
    const place = taken.filter((row) => row.kind === 'place').map(placing)
    if (place.length > 0) return { place, run: [], busy: false }
    const run: OrderedEntry[] = taken.filter((row) => row.kind === 'run').map((row) => ({ ...this.host.entryOf(row), orderKey: keyOfStored(row.order_key), late: row.late === true }))
    return { place: [], run, busy: taken.some((row) => row.kind === 'busy') }
  }

  /**
   * `<table>_complete_next` (postgres-order-sql.ts); undefined when the table's statements are of
   * a version without it (created by migrations not run again since): the caller completes as before.
   */
  async completeWithNext(entry: OrderedEntry, visibilityMs: number, chain: boolean): Promise<{ done: boolean; next?: OrderedEntry } | undefined> {
    const values = [entry.keys[0], entry.lease, this.host.retentionMs, storedKey(entry.orderKey), chain, Math.max(1, Math.ceil(visibilityMs))]
    const { rows } = await this.host.run('complete', () =>
      this.host.query(this.sql.completeNext, values).catch((error: unknown) => {
        // undefined_function: nothing ran.
        if ((error as { code?: unknown } | null)?.code === '42883') return undefined
        throw error
      }),
    ) ?? {}
    if (rows === undefined) return undefined
    const row = rows[0] as ({ done: boolean; order_key: string | null; late: boolean | null } & PlacingRow) | undefined
    if (row === undefined) throw new InboxError('refused', 'PostgresInbox.complete', 'svc-webhooks: PostgresInbox.complete got no row from the database.')
    if (row.done !== true) return { done: false }
    if (row.order_key === null) return { done: true }
    return { done: true, next: { ...this.host.entryOf(row), orderKey: keyOfStored(row.order_key), late: row.late === true } }
  }

  async place(placements: readonly Placement[]): Promise<boolean[]> {
    if (placements.length === 0) return []
    const { rows } = await this.host.run('place', () =>
      this.host.query(this.sql.place, [
        placements.map((p) => p.entry.keys[0]),
        placements.map((p) => p.entry.lease),
        placements.map((p) => storedKey(p.key)),
        placements.map((p) => p.order),
        placements.map((p) => p.strict),
      ]),
    )
    const placed = new Set((rows as { key: string }[]).map((row) => row.key))
    return placements.map((p) => placed.has(p.entry.keys[0]!))
  }

  async admit(want: number, rate?: { perSecond: number; burst: number }): Promise<Admission> {
    if (!rate) {
      const { pause } = await this.flow()
      return { granted: pause.paused ? 0 : Math.floor(want), waitMs: 0, pause }
    }
    const { rows } = await this.host.run('admit', () => this.host.query(this.sql.admit, [Math.floor(want), rate.perSecond, rate.burst]))
    const row = rows[0] as (PauseRow & { granted: number; tokens: number }) | undefined
    if (!row) return { granted: 0, waitMs: 1000, pause: { paused: false, version: 0 } }
    const granted = Number(row.granted)
    return { granted, waitMs: tokenWaitMs(granted, Number(row.tokens), rate.perSecond), pause: pauseOf(row) }
  }

  async refund(tokens: number, rate: { perSecond: number; burst: number }): Promise<void> {
    await this.host.run('refund', () => this.host.query(this.sql.refund, [tokens, rate.burst]))
  }

  async setPause(paused: boolean, by?: string, expected?: number): Promise<PauseState | undefined> {
    const { rows } = await this.host.run('setPause', () => this.host.query(this.sql.setPause, [paused, by ?? null, expected ?? null]))
    return rows[0] ? pauseOf(rows[0] as PauseRow) : undefined
  }

  async claimMode(mode: WorkerMode, worker: string, ttlMs: number): Promise<boolean> {
    const { rows } = await this.host.run('claimMode', () => this.host.query(this.sql.claimMode, [mode, worker, Math.max(1, Math.ceil(ttlMs))]))
    return (rows[0] as { claimed: boolean } | undefined)?.claimed === true
  }

  async releaseMode(mode: WorkerMode, worker: string): Promise<void> {
    await this.host.run('releaseMode', () => this.host.query(this.sql.releaseMode, [mode, worker]))
  }

  async flow(): Promise<{ pause: PauseState; perSecond?: number }> {
    const { rows } = await this.host.run('flow', () => this.host.query(this.sql.read, []))
    const row = rows[0] as (PauseRow & { per_second: number | null }) | undefined
    if (!row) return { pause: { paused: false, version: 0 } }
    return { pause: pauseOf(row), ...(row.per_second !== null && { perSecond: Number(row.per_second) }) }
  }
}

/**
 * A key as stored: Postgres text cannot hold NUL, which starts the key of a delivery placed alone
 * (src/inbox/ordering.ts), so NUL is written as U+0001 '0' and U+0001 as U+0001 '1' (one key, one
 * text; keys without either are stored as they are).
 */
export function storedKey(key: string): string {
  return key.replaceAll('\u0001', '\u00011').replaceAll('\u0000', '\u00010')
}

/** The key {@link storedKey} stored: every U+0001 in it starts a pair, so the pairs cannot overlap. */
function keyOfStored(stored: string): string {
  return stored.replaceAll('\u00010', '\u0000').replaceAll('\u00011', '\u0001')
}

/** What the take reads of a delivery handed out to be placed (`placingColumns` in postgres-order-sql.ts). */
interface PlacingRow {
  keys: string[]
  id: string
  body: Uint8Array
  received_ms: number
  lease: string
}

/** A delivery handed out to be placed, from its row: what placing reads is filled in, the rest is blank. */
function placing(row: PlacingRow): InboxEntry {
  const receivedAt = Math.round(row.received_ms)
  // The body is read (parsed for the key and the order) and dropped: pg's Buffer is not copied.
  return { keys: row.keys, endpoint: '', id: row.id, timestamp: 0, signatureVersion: 'v2', secretIndex: 0, rawBody: row.body, receivedAt, attempts: 0, takes: 0, retriesSince: receivedAt, lease: row.lease }
}

function pauseOf(row: PauseRow): PauseState {
  const state: PauseState = { paused: row.paused === true, version: Number(row.version) }
  if (state.paused) {
    if (row.paused_by !== null) state.by = row.paused_by
    if (row.since_ms > 0) state.since = Math.round(row.since_ms)
  }
  return state
}
