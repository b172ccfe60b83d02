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

/** A claim in progress: held by `owner` until `expiresAt`. */
interface Claim {
  owner: string
  expiresAt: number
}

/**
 * In-process idempotency store. Use `RedisStore` (`svc-webhooks/redis`) when more than one
 * process receives deliveries for the same endpoint.
 *
 * @example
 * const receiver = createWebhookReceiver({ secret, store: new MemoryStore({ maxEntries: 500_000 }), on })
 */
export class MemoryStore implements IdempotencyStore {
  readonly maxEntries: number
  private readonly now: () => number
  /** Completed ids → expiry in seconds since `epoch` (a small integer: compact in V8 maps). */
  private readonly completed = new Map<string, number>()
  private readonly claims = new Map<string, Claim>()
  private readonly epoch: number
  /** A live iterator over `completed` and the entry it last gave: see `oldest()`. */
  private cursor: MapIterator<[string, number]> | undefined
  private head: [string, number] | undefined
  /** No completion expires before this (seconds since `epoch`): the expiry sweep is skipped until then. */
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
    return this.completed.size + this.claims.size
  }

  // Synchronous: the receiver skips a promise and a microtask per call (the contract allows plain values).
  claim(key: string, owner: string, leaseMs: number): ClaimResult {
    const now = this.now()
    const done = this.completed.get(key)
    if (done !== undefined) {
      if (this.epoch + done > now / 1000) return 'completed'
      this.completed.delete(key)
    }
    const claim = this.claims.get(key)
    if (claim !== undefined && claim.expiresAt > now) return 'in_flight'
    this.claims.delete(key)
    this.claims.set(key, { owner, expiresAt: now + leaseMs })
    this.evict(now)
    return 'claimed'
  }

  complete(key: string, owner: string, retentionMs: number): boolean {
    const claim = this.claims.get(key)
    const owned = claim !== undefined && claim.owner === owner
    // A completion ends every claim on the id, also one taken over after this owner's lease expired.
    if (claim !== undefined) this.claims.delete(key)
    const now = this.now()
    this.completed.delete(key)
    const expiry = Math.ceil((now + retentionMs) / 1000) - this.epoch
    this.completed.set(key, expiry)
    if (expiry < this.nextExpiry) this.nextExpiry = expiry
    this.evict(now)
    return owned
  }

  release(key: string, owner: string): boolean {
    const claim = this.claims.get(key)
    if (claim === undefined || claim.owner !== owner) return false
    this.claims.delete(key)
    return true
  }

  /**
   * The oldest completion. A Map iterator made afresh would walk every deleted slot V8 keeps at the
   * front of the table until it rehashes (about 100x the cost of a claim once the store is full),
   * so one live iterator keeps its place; an entry deleted or re-set since it was read is skipped.
   */
  private oldest(): [string, number] | undefined {
    for (;;) {
      if (this.head !== undefined && this.completed.get(this.head[0]) === this.head[1]) return this.head
      this.cursor ??= this.completed.entries()
      const next = this.cursor.next()
      if (next.done) {
        // Every entry before the cursor is gone: the map is empty, start afresh on the next insert.
        this.cursor = undefined
        this.head = undefined
        return undefined
      }
      this.head = next.value
    }
  }

  /** Drops expired completions, oldest first, then the oldest entries while over `maxEntries`. */
  private evict(now: number): void {
    const nowSeconds = now / 1000 - this.epoch
    if (nowSeconds >= this.nextExpiry) {
      let head = this.oldest()
      for (; head !== undefined && head[1] <= nowSeconds; head = this.oldest()) this.completed.delete(head[0])
      // Completions are kept in insertion order, so the head's expiry is (nearly always) the next one.
      this.nextExpiry = head === undefined ? Infinity : head[1]
    }
    while (this.completed.size + this.claims.size > this.maxEntries) {
      // Oldest completions go first; a claim is evicted only when no completion is left to make room.
      const head = this.oldest()
      if (head !== undefined) this.completed.delete(head[0])
      else this.claims.delete(this.claims.keys().next().value!)
    }
  }
}
