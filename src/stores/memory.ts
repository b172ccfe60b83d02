/**
 * `MemoryStore`: the default idempotency store for a receiver in one process. Atomic because
 * each method runs to completion on the event loop; bounded by `maxEntries` (oldest evicted
 * first); expiry checked on access, so it holds no timer that keeps a process alive.
 */
import type { ClaimResult, IdempotencyStore } from './store.js'

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most ids kept (claims and completions together). When full, the oldest entry is evicted:
   * a delivery older than that could then run again, so size it above the deliveries you
   * receive in a retention window.
   * @default 100000
   */
  maxEntries?: number
  /**
   * The clock, in milliseconds since the epoch.
   * @default Date.now
   */
  now?: () => number
}

/** A claim in progress: held by `owner` until `expiresAt` (milliseconds since the epoch). */
interface Claim {
  owner: string
  expiresAt: number
}

/** A completion is its expiry, in seconds since the store's `epoch` (a small integer: compact in V8 maps). */
type Entry = Claim | number

/**
 * In-process idempotency store. Use `RedisStore` (`svc-webhooks/redis`) when more than one
 * process receives deliveries for the same endpoint.
 *
 * One map holds claims and completions, in the order they were last written: a delivery costs
 * two lookups and two writes, and the oldest entry is always at the front.
 *
 * @example
 * const receiver = createWebhookReceiver({ secret, store: new MemoryStore({ maxEntries: 500_000 }), on })
 */
export class MemoryStore implements IdempotencyStore {
  readonly maxEntries: number
  private readonly now: () => number
  private readonly entries = new Map<string, Entry>()
  /** How many entries are claims: while some are not, eviction passes live claims over. */
  private claims = 0
  private readonly epoch: number
  /** A live iterator over `entries` and the entry it last gave: see `oldest()`. */
  private cursor: MapIterator<[string, Entry]> | undefined
  private head: [string, Entry] | undefined
  /** Nothing expires before this (seconds since `epoch`): the expiry sweep is skipped until then. */
  private nextExpiry = Infinity

  constructor({ maxEntries = 100_000, now = Date.now }: MemoryStoreOptions = {}) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries <= 0) {
      throw new TypeError('svc-webhooks: MemoryStore maxEntries must be a positive whole number.')
    }
    this.maxEntries = maxEntries
    this.now = now
    this.epoch = Math.floor(now() / 1000)
  }

  /** Ids currently held (claims and unexpired-or-unswept completions). */
  get size(): number {
    return this.entries.size
  }

  // Synchronous: the receiver skips a promise and a microtask per call (the contract allows plain values).
  claim(key: string, owner: string, leaseMs: number): ClaimResult {
    const now = this.now()
    const entry = this.entries.get(key)
    if (entry !== undefined) {
      if (typeof entry === 'number') {
        if (this.epoch + entry > now / 1000) return 'completed'
      } else {
        if (entry.expiresAt > now) return 'in_flight'
        this.claims--
      }
      // Expired: the new claim goes to the back, in the order of writing.
      this.entries.delete(key)
    }
    this.entries.set(key, { owner, expiresAt: now + leaseMs })
    this.claims++
    if (this.entries.size > this.maxEntries || now / 1000 - this.epoch >= this.nextExpiry) this.evict(now)
    return 'claimed'
  }

  complete(key: string, owner: string, retentionMs: number): boolean {
    const entry = this.entries.get(key)
    const now = this.now()
    const expiry = Math.ceil((now + retentionMs) / 1000) - this.epoch
    // A completion ends every claim on the id, also one taken over after this owner's lease
    // expired, and moves the id to the back: completions stay (nearly) in expiry order.
    if (entry !== undefined) {
      this.entries.delete(key)
      if (typeof entry !== 'number') this.claims--
    }
    this.entries.set(key, expiry)
    if (expiry < this.nextExpiry) this.nextExpiry = expiry
    if (entry === undefined && this.entries.size > this.maxEntries) this.evict(now)
    return entry !== undefined && typeof entry !== 'number' && entry.owner === owner
  }

  release(key: string, owner: string): boolean {
    const entry = this.entries.get(key)
    if (entry === undefined || typeof entry === 'number' || entry.owner !== owner) return false
    this.entries.delete(key)
    this.claims--
    return true
  }

  /**
   * The oldest entry. A Map iterator made afresh would walk every deleted slot V8 keeps at the
   * front of the table until it rehashes (about 100x the cost of a claim once the store is full),
   * so one live iterator keeps its place. What it gives is current when given (it skips deleted
   * entries, and meets a re-set one again further on); only the head kept from an earlier call
   * is checked. Past the end it starts over once, for the live claims eviction passed over.
   */
  private oldest(): [string, Entry] | undefined {
    if (this.head !== undefined) {
      if (this.entries.get(this.head[0]) === this.head[1]) return this.head
      this.head = undefined
    }
    for (let restarted = false; ; restarted = true) {
      this.cursor ??= this.entries.entries()
      const next = this.cursor.next()
      if (!next.done) return (this.head = next.value)
      this.cursor = undefined
      if (restarted || this.entries.size === 0) return undefined
    }
  }

  private drop([key, entry]: [string, Entry]): void {
    this.entries.delete(key)
    this.head = undefined
    if (typeof entry !== 'number') this.claims--
  }

  /** When `entry` ends, in seconds since `epoch`. */
  private expiryOf(entry: Entry): number {
    return typeof entry === 'number' ? entry : entry.expiresAt / 1000 - this.epoch
  }

  /**
   * Drops expired entries, oldest first, then the oldest entries while over `maxEntries`: a live
   * claim (its handler still running) is passed over while any completion is left to make room.
   */
  private evict(now: number): void {
    const nowSeconds = now / 1000 - this.epoch
    if (nowSeconds >= this.nextExpiry) {
      let head = this.oldest()
      for (; head !== undefined && this.expiryOf(head[1]) <= nowSeconds; head = this.oldest()) this.drop(head)
      // Entries are kept in the order written, so the head's expiry is (nearly always) the next one.
      this.nextExpiry = head === undefined ? Infinity : this.expiryOf(head[1])
    }
    while (this.entries.size > this.maxEntries) {
      const head = this.oldest()!
      if (typeof head[1] !== 'number' && head[1].expiresAt > now && this.claims < this.entries.size) this.head = undefined
      else this.drop(head)
    }
  }
}
