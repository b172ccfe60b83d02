/**
 * The idempotency store contract: claim → run → complete, atomically (DESIGN.md "Answers,
 * idempotency"). A claim has a lease so a crashed process does not block an id forever; a
 * completion is kept for the retention window; only the owner of a claim may release it.
 */

/**
 * How long a processed delivery's keys are remembered by default, by the receiver's store and by
 * every inbox, and how long the inbox worker keeps retrying a delivery: 72 h (DESIGN.md "Answers,
 * idempotency"). A resend within it is answered 200 duplicate.
 */
export const DEFAULT_RETENTION_MS = 72 * 60 * 60 * 1000

/** Runs a store call whose outcome does not matter (a sync throw, a rejection, a plain value): never throws. */
export async function quietly(call: () => unknown): Promise<void> {
  try {
    await call()
  } catch {
    // The caller has nothing better to do: a lease expires on its own.
  }
}

/** What a claim found. */
export type ClaimResult =
  /** The caller now owns the id until `leaseMs` passes or it completes or releases it. */
  | 'claimed'
  /** Another request holds an unexpired claim on the id: answer 429 and let the sender retry. */
  | 'in_flight'
  /** The id was processed within the retention window: answer 2xx, do not run the handler. */
  | 'completed'

/**
 * Where processed delivery ids are kept. Every method may reject when the backing service is
 * unreachable; the receiver then answers 503 and does not run the handler. A method may also
 * answer synchronously (MemoryStore does) or throw.
 *
 * @example
 * const store: IdempotencyStore = new MemoryStore()
 * if ((await store.claim('ep:123', owner, 60_000)) === 'claimed') { ... }
 */
export interface IdempotencyStore {
  /**
   * Atomically claims `key` for `owner` unless it is claimed (and the lease is live) or completed.
   * `deadline` (wall-clock ms, as `Date.now()`), when given, is when the caller needs its answer:
   * a store that waits for its server (a restart, a failover) waits until then instead of its
   * own `timeoutMs`, so one deadline covers the whole request. Stores that never wait ignore it.
   */
  claim(key: string, owner: string, leaseMs: number, deadline?: number): ClaimResult | Promise<ClaimResult>
  /**
   * Marks `key` processed for `retentionMs`. Resolves false when `owner` no longer held a live
   * claim (its lease expired, whether or not another request claimed it since); the completion
   * is recorded either way.
   */
  complete(key: string, owner: string, retentionMs: number, deadline?: number): boolean | Promise<boolean>
  /** Drops the claim if `owner` still holds it, so a retry can run the handler. */
  release(key: string, owner: string): boolean | Promise<boolean>
}

/**
 * Whether `store` has the {@link IdempotencyStore} methods: checked when a receiver, a worker or a
 * consumer is created, not on a delivery.
 *
 * @example
 * if (!isIdempotencyStore(options.store)) throw new TypeError('svc-webhooks: `store` must implement claim, complete and release.')
 */
export function isIdempotencyStore(store: unknown): store is IdempotencyStore {
  const s = store as IdempotencyStore | undefined
  return typeof s?.claim === 'function' && typeof s.complete === 'function' && typeof s.release === 'function'
}
