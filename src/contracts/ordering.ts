/**
 * What an engine offers for order within a conversation and for flow control (DESIGN.md "Order
 * within a conversation", "Flow control"), beside the {@link WebhookInbox} contract. The worker
 * holds the policy (the key function, strictness, the rate); the engine holds the state every
 * worker process shares: which deliveries are placed under which key, who runs a key's head,
 * the pause flag and the token bucket.
 *
 * How an ordered take works, on every engine:
 * 1. A delivery arrives unplaced. When its inbox has an `ordering`, the append stored where it is
 *    filed (`InboxDelivery.filed`), and a take whose worker has the same ordering places it
 *    itself (`options.filed`). Otherwise a take hands out due unplaced deliveries to be *placed*,
 *    under a short lease: the worker computes each one's key and order and calls
 *    {@link OrderingEngine.place}.
 * 2. While any delivery is due unplaced or being placed, no head is handed out: the head of a key
 *    is then the oldest of every delivery present, not only of those placed so far.
 * 3. Otherwise it leases the head of keys nobody runs: the lowest order among the key's
 *    deliveries that is due (strict: the lowest, due or not; a retrying head holds its key).
 */
import type { InboxEntry } from './inbox.js'

/** A taken delivery with what ordering knows of it. */
export interface OrderedEntry extends InboxEntry {
  /** The key it was placed under. */
  orderKey: string
  /** Older than a delivery of its key already processed: it still runs, marked late. */
  late: boolean
}

/** What an ordered take brings back: deliveries to place, or heads to run, or neither. */
export interface OrderedTake {
  /** Unplaced deliveries, leased to this caller until it places them (or the lease ends). */
  place: InboxEntry[]
  /** Heads of keys, leased for `visibilityMs`, to run. */
  run: OrderedEntry[]
  /**
   * Another worker is placing deliveries now: nothing could be run without risking an order
   * it has not seen yet. Ask again shortly.
   */
  busy: boolean
  /** Deliveries filed at append were placed, and more may be due: take again at once. */
  more?: boolean
}

/** Where a delivery goes: its key and its position in it. */
export interface Placement {
  entry: InboxEntry
  key: string
  /**
   * Fixed-width text whose byte order is the run order: `message.created_at` in microseconds,
   * then the time received ({@link orderOf} in src/inbox/ordering.ts).
   */
  order: string
  /** A failing head holds later ones of its key (true), or lets them pass (false). */
  strict: boolean
}

/** The pause flag as stored in the engine. */
export interface PauseState {
  paused: boolean
  /** Who paused, as given to `pause(by)`. */
  by?: string
  /** When it was paused, ms since the epoch (the engine's clock). */
  since?: number
  /** Bumped by every pause and resume: what a conditional write compares. */
  version: number
}

/** What {@link FlowEngine.admit} grants. */
export interface Admission {
  /** Deliveries the caller may start now (tokens taken from the shared bucket). */
  granted: number
  /** When nothing was granted: how long until the next token (or until looking at the pause flag again). */
  waitMs: number
  pause: PauseState
}

/** The options of one ordered take. */
export interface OrderedTakeOptions {
  /** How long deliveries handed out to be placed stay leased to this caller. */
  placeLeaseMs: number
  /** Keys whose head just finished here: looked at now. */
  poke: readonly string[]
  /** Placements to make first, in the same round trip (engines with `placesInTake`). */
  placements?: readonly Placement[]
  /**
   * The caller's ordering is its inbox's: deliveries filed at append (`InboxDelivery.filed`) are
   * placed by the take itself, with this `strict`, never handed out to be placed.
   */
  filed?: { strict: boolean }
}

/** Order kept across every worker process on one inbox. */
export interface OrderingEngine {
  /**
   * One ordered take. `poke` names keys whose head just finished here, so they are looked at now
   * rather than when that head's lease would have ended.
   */
  takeOrdered(max: number, visibilityMs: number, options: OrderedTakeOptions): Promise<OrderedTake>
  /** Places deliveries taken to be placed; each answers false when its placing lease was lost. */
  place(placements: readonly Placement[]): Promise<boolean[]>
  /**
   * True when `takeOrdered` places `options.placements` (as {@link place} would) before it takes,
   * in the same round trip: the worker then hands a placed batch to its next take instead of
   * calling `place`, one round trip per batch fewer. An engine without it never gets `placements`.
   */
  readonly placesInTake?: boolean
  /**
   * Completes a head (as `WebhookInbox.complete`) and, in the same round trip, leases the next head
   * of its key to the caller when a take would lease it now, so a worker going through a
   * conversation needs no take between two of its messages. Never a suspect (a hand-out that
   * ended without a result), nothing while paused. A repeat of the same completion (its reply
   * lost) brings back the same next head. `chain` false: only completes. Engines without it: the
   * worker completes and takes as usual.
   */
  completeNext?(entry: OrderedEntry, visibilityMs: number, chain: boolean): Promise<{ done: boolean; next?: OrderedEntry }>
}

/** A pause flag and a token bucket shared by every worker on one inbox. */
export interface FlowEngine {
  /**
   * Asks to start up to `want` deliveries: none while paused; with `perSecond`, at most the
   * tokens in the bucket shared by every worker (refilled at `perSecond`, holding at most `burst`).
   */
  admit(want: number, rate?: { perSecond: number; burst: number }): Promise<Admission>
  /** Gives back tokens admitted but not used (the take found fewer deliveries). */
  refund(tokens: number, rate: { perSecond: number; burst: number }): Promise<void>
  /** Sets the pause flag, written only if `expected` (a version) is still current when given. */
  setPause(paused: boolean, by?: string, expected?: number): Promise<PauseState | undefined>
  /** The pause flag and the last rate a worker asked for. */
  flow(): Promise<{ pause: PauseState; perSecond?: number }>
}

/** Whether a worker runs with `ordering` or without. */
export type WorkerMode = 'ordered' | 'unordered'

/**
 * The mode of the workers running on one inbox, so that an ordered and an unordered worker never
 * run side by side: the unordered one would take deliveries before they are placed and run them
 * out of order.
 */
export interface ModeEngine {
  /**
   * Marks `worker` (an id drawn by the worker) as running in `mode` on this inbox for `ttlMs`
   * (renewed while it runs), unless a live mark of the other mode exists: then nothing is written
   * and the answer is false. Check and mark are one atomic step, so two workers of different modes
   * starting at once cannot both get true.
   */
  claimMode(mode: WorkerMode, worker: string, ttlMs: number): Promise<boolean>
  /** Removes the mark of `worker` (it stopped): workers of the other mode need not wait for it to end. */
  releaseMode(mode: WorkerMode, worker: string): Promise<void>
}

/** Whether `inbox` can keep order. */
export function isOrderingEngine(inbox: unknown): inbox is OrderingEngine {
  return typeof (inbox as Partial<OrderingEngine> | undefined)?.takeOrdered === 'function' && typeof (inbox as Partial<OrderingEngine>).place === 'function'
}

/** Whether `inbox` keeps a pause flag and a token bucket. */
export function isFlowEngine(inbox: unknown): inbox is FlowEngine {
  return typeof (inbox as Partial<FlowEngine> | undefined)?.admit === 'function' && typeof (inbox as Partial<FlowEngine>).setPause === 'function'
}

/** Whether `inbox` records the mode of its workers. */
export function isModeEngine(inbox: unknown): inbox is ModeEngine {
  return typeof (inbox as Partial<ModeEngine> | undefined)?.claimMode === 'function'
}
