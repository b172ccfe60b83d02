/**
 * `MemoryStore`: the default idempotency store for a receiver in one process. Atomic because
 * each method runs to completion on the event loop; bounded by `maxEntries` (oldest evicted
 * first); expiry checked on access, so it holds no timer that keeps a process alive.
 *
 * Hand-written rather than a `Map`: a full store is far larger than the CPU caches, and a `Map`
 * of string keys compares every key on a lookup's chain by reading that key's string, one cache
 * miss each. Here a lookup reads a run of (hash, position) pairs in one typed array and touches
 * a stored key only when the hash matches. Entries sit in a ring in the order written, so the
 * oldest is at the front. The core has no runtime dependencies, so there is no library for it.
 * Its internals are `#private`: a minifier renames those, where a TypeScript `private` field keeps
 * its name in every bundle.
 */
import type { ClaimResult, IdempotencyStore } from '../contracts/store.js'

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

/** Smallest ring; it doubles as entries arrive, up to what `maxEntries` needs. */
const MIN_RING = 64

/** 32-bit FNV-1a over the UTF-16 units, then murmur3's finalizer so the low bits (the home slot) mix well. */
function hashKey(key: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return h ^ (h >>> 16)
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
  readonly #now: () => number
  /** The ring can never need more than this: `maxEntries` plus an eighth for holes, as a power of two. */
  readonly #maxRing: number

  // The ring: entry `p` (0 <= p < ring size) is keys[p], hashes[p], owners[p] (a claim's owner;
  // undefined for a completion) and expiries[p] (ms since the epoch: a claim's lease, a
  // completion's retention). A deleted entry leaves a hole (keys[p] undefined) until the front
  // passes it or the ring is rebuilt. `head` and `tail` count up; the position is the count
  // masked by the ring size.
  #keys: (string | undefined)[] = []
  #hashes = new Int32Array(0)
  #owners: (string | undefined)[] = []
  #expiries = new Float64Array(0)
  #ringMask = -1
  #head = 0
  #tail = 0

  /** The index: slots[2i] a hash, slots[2i + 1] its entry's ring position + 1 (0: empty). Linear probing, at most half full. */
  #slots = new Int32Array(0)
  #slotMask = -1

  /** Entries held, and how many of them are claims. */
  #live = 0
  #claims = 0
  /**
   * When `claim` next runs the expiry sweep (ms since the epoch): the front entry's expiry as of
   * the last sweep, lowered by every expiry written since. Not a bound on every entry: one further
   * back that was written before that sweep can expire earlier (see sweep()).
   */
  #nextExpiry = Infinity
  /** The last key hashed: `complete` and `release` get the string `claim` just hashed. */
  #lastKey: string | undefined
  #lastHash = 0

  constructor({ maxEntries = 100_000, now = Date.now }: MemoryStoreOptions = {}) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries <= 0) {
      throw new TypeError('svc-webhooks: MemoryStore maxEntries must be a positive whole number.')
    }
    this.maxEntries = maxEntries
    this.#now = now
    let ring = MIN_RING
    while (ring < maxEntries + 1 + Math.ceil(maxEntries / 8)) ring *= 2
    this.#maxRing = ring
  }

  /** Ids currently held (claims and unexpired-or-unswept completions). */
  get size(): number {
    return this.#live
  }

  // Synchronous: the receiver skips a promise and a microtask per call (the contract allows plain values).
  claim(key: string, owner: string, leaseMs: number): ClaimResult {
    const now = this.#now()
    const hash = this.#hash(key)
    const slot = this.#find(key, hash)
    if (slot >= 0) {
      const at = this.#slots[2 * slot + 1]! - 1
      if (this.#expiries[at]! > now) return this.#owners[at] === undefined ? 'completed' : 'in_flight'
      // Expired: the new claim goes to the back, in the order of writing.
      this.#remove(at, slot)
    }
    if (now >= this.#nextExpiry) this.#sweep(now)
    this.#makeRoom(now)
    this.#append(key, hash, owner, now + leaseMs)
    return 'claimed'
  }

  complete(key: string, owner: string, retentionMs: number): boolean {
    const now = this.#now()
    // Rounded up to a whole second (never shorter than asked), as when expiries were stored in
    // seconds; the Float64Array holds milliseconds, so this only keeps expiry times as they were.
    const expiresAt = Math.ceil((now + retentionMs) / 1000) * 1000
    const hash = this.#hash(key)
    const slot = this.#find(key, hash)
    if (slot >= 0) {
      const at = this.#slots[2 * slot + 1]! - 1
      const claimedBy = this.#owners[at]
      if (claimedBy !== undefined) {
        // A completion ends every claim on the id, also one taken over after this owner's lease
        // expired. A claim is recent (within its lease), so the completion keeps its place. The
        // owner held it only while its lease was live: an expired claim answers false whether or
        // not a sweep has dropped it yet (as the Redis and Postgres stores answer).
        const held = claimedBy === owner && this.#expiries[at]! > now
        this.#owners[at] = undefined
        this.#expiries[at] = expiresAt
        this.#claims--
        if (expiresAt < this.#nextExpiry) this.#nextExpiry = expiresAt
        return held
      }
      // Completed again: to the back, in the order of writing.
      this.#remove(at, slot)
    }
    this.#makeRoom(now)
    this.#append(key, hash, undefined, expiresAt)
    return false
  }

  release(key: string, owner: string): boolean {
    const slot = this.#find(key, this.#hash(key))
    if (slot < 0) return false
    const at = this.#slots[2 * slot + 1]! - 1
    // The first test is not redundant: it keeps a completion (owner undefined) from being
    // released by a plain-JavaScript caller that passes no owner. The owner holds the claim only
    // while its lease is live: an expired one answers false whether or not a sweep has dropped
    // it yet (as the Redis, Postgres and Durable Object stores answer).
    if (this.#owners[at] === undefined || this.#owners[at] !== owner || this.#expiries[at]! <= this.#now()) return false
    this.#remove(at, slot)
    return true
  }

  #hash(key: string): number {
    if (key !== this.#lastKey) {
      this.#lastKey = key
      this.#lastHash = hashKey(key)
    }
    return this.#lastHash
  }

  /** The slot holding `key`, or -1. */
  #find(key: string, hash: number): number {
    const slots = this.#slots, slotMask = this.#slotMask, keys = this.#keys
    if (slotMask < 0) return -1
    for (let i = hash & slotMask; ; i = (i + 1) & slotMask) {
      const entry = slots[2 * i + 1]!
      if (entry === 0) return -1
      if (slots[2 * i] === hash && keys[entry - 1] === key) return i
    }
  }

  /** The slot pointing at ring position `at`. */
  #slotOf(at: number): number {
    const slots = this.#slots, slotMask = this.#slotMask
    let i = this.#hashes[at]! & slotMask
    while (slots[2 * i + 1] !== at + 1) i = (i + 1) & slotMask
    return i
  }

  #append(key: string, hash: number, owner: string | undefined, expiresAt: number): void {
    if (this.#tail - this.#head === this.#ringMask + 1) this.#rebuild()
    const at = this.#tail & this.#ringMask
    this.#keys[at] = key
    this.#hashes[at] = hash
    this.#owners[at] = owner
    this.#expiries[at] = expiresAt
    this.#tail++
    this.#live++
    if (owner !== undefined) this.#claims++
    if (expiresAt < this.#nextExpiry) this.#nextExpiry = expiresAt
    const slots = this.#slots, slotMask = this.#slotMask
    let i = hash & slotMask
    while (slots[2 * i + 1] !== 0) i = (i + 1) & slotMask
    slots[2 * i] = hash
    slots[2 * i + 1] = at + 1
  }

  /** Deletes the entry at ring position `at`, indexed by `slot`. */
  #remove(at: number, slot: number): void {
    // Backward-shift deletion: pull later entries of the probe run into the gap, so no lookup
    // ever needs tombstones.
    const slots = this.#slots, slotMask = this.#slotMask
    let gap = slot
    for (let j = (gap + 1) & slotMask; slots[2 * j + 1] !== 0; j = (j + 1) & slotMask) {
      const home = slots[2 * j]! & slotMask
      const staysPut = gap <= j ? gap < home && home <= j : gap < home || home <= j
      if (!staysPut) {
        slots[2 * gap] = slots[2 * j]!
        slots[2 * gap + 1] = slots[2 * j + 1]!
        gap = j
      }
    }
    slots[2 * gap] = 0
    slots[2 * gap + 1] = 0
    if (this.#owners[at] !== undefined) this.#claims--
    this.#keys[at] = undefined
    this.#owners[at] = undefined
    this.#live--
    if (this.#keys[this.#head & this.#ringMask] === undefined) this.#skipHoles()
  }

  /** Moves the front past deleted entries. */
  #skipHoles(): void {
    while (this.#head < this.#tail && this.#keys[this.#head & this.#ringMask] === undefined) this.#head++
  }

  /** Drops expired entries from the front; a live claim there stops the sweep until its lease ends. */
  #sweep(now: number): void {
    while (this.#head < this.#tail) {
      const at = this.#head & this.#ringMask
      if (this.#expiries[at]! > now) break
      this.#remove(at, this.#slotOf(at))
    }
    // Entries are in the order written, not the order they expire: a claim behind a completion, a
    // shorter retention, or a claim completed in place after a later one can expire before the
    // front. Such an entry stays (claim treats it as expired) until a later sweep reaches it, its
    // key is claimed again, or makeRoom evicts it.
    this.#nextExpiry = this.#head < this.#tail ? this.#expiries[this.#head & this.#ringMask]! : Infinity
  }

  /**
   * Evicts the oldest entries until one more fits under `maxEntries`. A live claim (its handler
   * still running) is moved to the back while any completion is left to make room.
   */
  #makeRoom(now: number): void {
    while (this.#live >= this.maxEntries) {
      const at = this.#head & this.#ringMask
      const owner = this.#owners[at]
      if (owner !== undefined && this.#expiries[at]! > now && this.#claims < this.#live) {
        const key = this.#keys[at]!
        const expiresAt = this.#expiries[at]!
        this.#remove(at, this.#slotOf(at))
        this.#append(key, this.#hashes[at]!, owner, expiresAt)
      } else {
        this.#remove(at, this.#slotOf(at))
      }
    }
  }

  /**
   * Copies the entries, oldest first, into a ring with room to spare and indexes them again:
   * twice the size while more than half of it is in use (up to `maxRing`), the same size
   * otherwise (dropping the holes).
   */
  #rebuild(): void {
    const size = this.#ringMask + 1
    const ring = size === 0 ? MIN_RING : this.#live > size / 2 && size < this.#maxRing ? size * 2 : size
    const keys = this.#keys, hashes = this.#hashes, owners = this.#owners, expiries = this.#expiries, ringMask = this.#ringMask, head = this.#head, tail = this.#tail
    this.#keys = new Array<string | undefined>(ring).fill(undefined)
    this.#hashes = new Int32Array(ring)
    this.#owners = new Array<string | undefined>(ring).fill(undefined)
    this.#expiries = new Float64Array(ring)
    this.#ringMask = ring - 1
    this.#slots = new Int32Array(ring * 4)
    this.#slotMask = ring * 2 - 1
    this.#head = 0
    this.#tail = 0
    this.#live = 0
    this.#claims = 0
    for (let n = head; n < tail; n++) {
      const at = n & ringMask
      const key = keys[at]
      if (key !== undefined) this.#append(key, hashes[at]!, owners[at], expiries[at]!)
    }
  }
}
