/**
 * RedisInbox's ordering, flow control and workers' mode: the calls of src/contracts/ordering.ts
 * over the scripts of src/inbox/redis-order-scripts.ts. Kept apart from the inbox class, which
 * hands it its script runner (deadline, retries, error kinds) and its row reader.
 */
import type { InboxEntry } from '../contracts/inbox.js'
import type { Admission, OrderedEntry, OrderedTake, OrderedTakeOptions, PauseState, Placement, WorkerMode } from '../contracts/ordering.js'
import { ADMIT, CLAIM_MODE, COMPLETE_NEXT, FLOW, PLACE, REFUND, RELEASE_MODE, SET_PAUSE, TAKE_ORDERED } from './redis-order-scripts.js'
import { EXTRA, RELEASE } from './redis-scripts.js'
import { ORDER_WIDTH } from './ordering.js'

/** Runs a script of the inbox (prefix added), within its deadline. */
type Call = (what: string, script: string, args: string[] | (() => string[]), onLate?: (late: unknown) => void) => Promise<unknown>

/**
 * Unplaced deliveries handed out to be placed per ordered take (and fewer once their bodies pass
 * 4 MiB): each batch is a round trip every worker waits behind while deliveries are unplaced.
 */
const PLACE_BATCH = 500

const decoder = new TextDecoder()
const text = (value: unknown): string => (value instanceof Uint8Array ? decoder.decode(value) : String(value ?? ''))
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : [])

export class RedisOrder {
  /** A placed batch rides on the next ordered take (TAKE_ORDERED places it first). */
  readonly placesInTake = true

  constructor(
    private readonly call: Call,
    /** A reply row (FIELDS, lease, primary key) as an entry; undefined when it cannot be read. */
    private readonly entryOf: (row: unknown) => InboxEntry | undefined,
    private readonly retentionMs: () => number,
  ) {}

  async takeOrdered(max: number, visibilityMs: number, { placeLeaseMs, poke, placements = [], filed }: OrderedTakeOptions): Promise<OrderedTake> {
    const wanted = Math.max(0, Math.min(1000, Math.floor(max)))
    const args = () => [
      String(wanted),
      String(Math.max(1, Math.ceil(visibilityMs))),
      crypto.randomUUID(),
      String(Math.max(1, Math.ceil(placeLeaseMs))),
      String(PLACE_BATCH),
      String(Math.ceil(this.retentionMs())),
      filed === undefined ? '' : filed.strict ? '1' : '0',
      String(poke.length),
      ...poke,
      ...placementArgs(placements),
    ]
    const reply = list(
      await this.call('takeOrdered', TAKE_ORDERED, args, (late) => {
        // Heads leased after the caller gave up: handed back now, not when the lease would end.
        const [kind, rows] = list(late)
        if (text(kind) !== 'run') return
        for (const row of list(rows)) {
          const fields = list(row)
          this.call('release', RELEASE, [text(fields[EXTRA + 1]), text(fields[EXTRA])]).catch(() => undefined)
        }
      }),
    )
    const kind = text(reply[0])
    if (kind === 'busy') return { place: [], run: [], busy: true }
    if (kind === 'more') return { place: [], run: [], busy: false, more: true }
    const rows = list(reply[1])
    if (kind === 'place') {
      const lease = text(reply[2])
      return { place: rows.flatMap((row) => placing(row, lease) ?? []), run: [], busy: false }
    }
    const run: OrderedEntry[] = []
    for (const row of rows) {
      // Set on the fresh entry, not copied: this runs for every head taken.
      const entry = this.entryOf(row) as OrderedEntry | undefined
      if (entry === undefined) continue
      const fields = list(row)
      entry.orderKey = text(fields[EXTRA + 2])
      entry.late = Number(fields[EXTRA + 3]) === 1
      run.push(entry)
    }
    return { place: [], run, busy: false }
  }

  /** COMPLETE_NEXT (redis-order-scripts.ts): `completeRetentionMs` is how long the dedupe keys are kept. */
  async completeWithNext(entry: OrderedEntry, visibilityMs: number, chain: boolean, completeRetentionMs: number): Promise<{ done: boolean; next?: OrderedEntry }> {
    const args = [entry.keys[0]!, entry.lease, String(Math.ceil(completeRetentionMs)), entry.orderKey, chain ? '1' : '0', String(Math.max(1, Math.ceil(visibilityMs))), String(Math.ceil(this.retentionMs()))]
    const reply = list(await this.call('complete', COMPLETE_NEXT, args))
    if (Number(reply[0]) !== 1) return { done: false }
    if (reply[1] === undefined) return { done: true }
    const next = this.entryOf(reply[1]) as OrderedEntry | undefined
    // A head nobody can read: left leased, it runs as a take's would be (the take's path buries it).
    if (next === undefined) return { done: true }
    const fields = list(reply[1])
    next.orderKey = text(fields[EXTRA + 2])
    next.late = Number(fields[EXTRA + 3]) === 1
    return { done: true, next }
  }

  async place(placements: readonly Placement[]): Promise<boolean[]> {
    if (placements.length === 0) return []
    return list(await this.call('place', PLACE, placementArgs(placements))).map((value) => Number(value) === 1)
  }

  async admit(want: number, rate?: { perSecond: number; burst: number }): Promise<Admission> {
    const reply = list(await this.call('admit', ADMIT, [String(Math.floor(want)), rate ? String(rate.perSecond) : '', rate ? String(rate.burst) : '']))
    return { granted: Number(reply[0]), waitMs: Number(reply[1]), pause: pauseOf(reply.slice(2)) }
  }

  async refund(tokens: number, rate: { perSecond: number; burst: number }): Promise<void> {
    await this.call('refund', REFUND, [String(tokens), String(rate.burst)])
  }

  async setPause(paused: boolean, by?: string, expected?: number): Promise<PauseState | undefined> {
    const reply = await this.call('setPause', SET_PAUSE, [paused ? '1' : '0', by ?? '', expected === undefined ? '' : String(expected)])
    return Array.isArray(reply) ? pauseOf(reply) : undefined
  }

  async claimMode(mode: WorkerMode, worker: string, ttlMs: number): Promise<boolean> {
    const other: WorkerMode = mode === 'ordered' ? 'unordered' : 'ordered'
    return Number(await this.call('claimMode', CLAIM_MODE, [mode, other, worker, String(Math.max(1, Math.ceil(ttlMs)))])) === 1
  }

  async releaseMode(mode: WorkerMode, worker: string): Promise<void> {
    await this.call('releaseMode', RELEASE_MODE, [mode, worker])
  }

  async flow(): Promise<{ pause: PauseState; perSecond?: number }> {
    const reply = list(await this.call('flow', FLOW, []))
    const perSecond = text(reply[4])
    return { pause: pauseOf(reply), ...(perSecond !== '' && { perSecond: Number(perSecond) }) }
  }
}

/**
 * A delivery handed out to be placed, from its reply row (body, receivedAt, primary key) and the
 * batch's placing lease: only what placing reads (the body for the key function, the time received
 * for the order, the primary key and the lease for PLACE) is fetched and filled in, the rest is
 * blank. Placing a backlog reads every body once more, so the other fields are not carried twice.
 */
function placing(row: unknown, lease: string): InboxEntry | undefined {
  const [body, receivedAt, pk] = list(row).map(text)
  const received = Number(receivedAt)
  if (!body || !pk || !Number.isFinite(received)) return undefined
  // A copy, not Buffer.from's view: small Buffers share a pool with unrelated bytes.
  const rawBody = new Uint8Array(Buffer.from(body, 'base64'))
  return { keys: [pk], endpoint: '', id: '', timestamp: 0, signatureVersion: 'v2', secretIndex: 0, rawBody, receivedAt: received, attempts: 0, takes: 0, retriesSince: received, lease }
}

/**
 * The script arguments of placements (PLACE_ALL in redis-order-scripts.ts): a count of groups,
 * then per run of placements that share a placing lease and strict flag (a batch is one run) the
 * lease, strict and a count, then per placement its key and member `<order>|<primary key>`. Two
 * values per delivery rather than five: a batch of hundreds is thousands of arguments fewer to
 * build, send and read.
 */
function placementArgs(placements: readonly Placement[]): string[] {
  const args = ['0']
  let groups = 0
  let countAt = 0
  let count = 0
  let lease: string | undefined
  let strict: boolean | undefined
  for (const { entry, key, order, strict: s } of placements) {
    // The member's first ORDER_WIDTH characters are its order: the script cuts it there.
    if (order.length !== ORDER_WIDTH) throw new RangeError(`svc-webhooks: an order is ${ORDER_WIDTH} characters (orderOf), not ${order.length}`)
    if (groups === 0 || entry.lease !== lease || s !== strict) {
      if (groups > 0) args[countAt] = String(count)
      lease = entry.lease
      strict = s
      groups++
      count = 0
      args.push(lease, strict ? '1' : '0', '')
      countAt = args.length - 1
    }
    count++
    args.push(key, `${order}|${entry.keys[0]!}`)
  }
  if (groups > 0) args[countAt] = String(count)
  args[0] = String(groups)
  return args
}

/** paused (0/1), by, since, version as a PauseState. */
function pauseOf([paused, by, since, version]: unknown[]): PauseState {
  const state: PauseState = { paused: Number(paused) === 1, version: Number(version) || 0 }
  if (state.paused) {
    if (text(by) !== '') state.by = text(by)
    if (Number(since) > 0) state.since = Number(since)
  }
  return state
}
