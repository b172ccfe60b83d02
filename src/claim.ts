/**
 * The store protocol, written once: claim every dedupe key of a delivery for one owner, run one
 * step (the receiver's handler, the Queue inbox's `send`, the worker's handler under its deadline),
 * then complete the keys, or release them when the step failed (DESIGN.md "Answers, idempotency").
 * The request path, `QueueInbox.append` and `processDelivery` all go through {@link claimRun}; each
 * maps its outcome to its own answer (a status, an append result, an ack), as BullMQ's
 * `Worker.processJob` leaves `moveToCompleted`/`moveToFailed` to the engine.
 *
 * A step past its deadline is abandoned, not finished: the caller's slot is free, but the step
 * may still be doing its work. Its keys stay claimed until it settles (completed when it
 * succeeds, released when it fails) or their lease ends, so a retry meets `in_flight` rather
 * than an empty claim and never runs beside it.
 *
 * A store that answers synchronously (MemoryStore) with a step that returns no promise is run to
 * the end without a single `await` or promise: each layer of promises costs a turn of the event
 * loop per delivery. The first promise met (a store call or the step) moves the rest onto the
 * asynchronous path.
 */
import { quietly, type ClaimResult, type IdempotencyStore } from './contracts/store.js'

/**
 * How a claimed run ended:
 * - `done`: the step ran and every key was completed by its owner;
 * - `completed` / `in_flight`: a key was already processed, or is held by another owner: the step
 *   did not run, and the keys claimed before it were released;
 * - `lease_lost`: the step ran and the keys were completed, but a lease had run out meanwhile
 *   (another owner may have run the step too);
 * - `{ stage: 'claim' }`: the store failed while claiming: the step did not run;
 * - `{ stage: 'step' }`: the step threw or rejected: the keys were released;
 * - `{ stage: 'complete' }`: the step ran but the store failed to record it: the claims expire.
 */
export type ClaimRunOutcome =
  | 'done'
  | Exclude<ClaimResult, 'claimed'>
  | 'lease_lost'
  | { stage: 'claim' | 'step' | 'complete'; error: unknown }

/**
 * Thrown (or rejected) by a step its caller stopped waiting for while its work still runs (a
 * handler past its deadline). {@link claimRun} answers `{ stage: 'step', error: reason }` at once
 * but keeps the keys claimed until `running` settles: a second run must not start beside it.
 *
 * @example
 * throw new AbandonedRun(new Error('handler timed out after 200 ms'), handlerPromise)
 */
export class AbandonedRun {
  constructor(
    /** Why the caller stopped waiting: the outcome's error. */
    readonly reason: unknown,
    /** The abandoned work: the keys are completed when it resolves, released when it rejects. */
    readonly running: PromiseLike<unknown>,
  ) {}
}

/** What {@link claimRun} claims, for whom, and for how long. */
export interface ClaimRun {
  /** No store: the step runs unguarded (an inbox that hands each delivery out once). */
  store: IdempotencyStore | undefined
  /** The dedupe keys, claimed in order. */
  keys: readonly string[]
  /** The claims' owner: unique to this run. */
  owner: string
  /** How long a claim holds its key while the step runs. */
  leaseMs: number
  /** How long a completed key is remembered. */
  retentionMs: number
  /**
   * When the caller needs its outcome (wall-clock ms): passed to every claim and completion, so a
   * store riding out a failover waits until then and no longer. Without it, each store call
   * waits its own `timeoutMs`.
   */
  deadline?: number
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  value !== null && typeof value === 'object' && typeof (value as PromiseLike<unknown>).then === 'function'

/**
 * Claims `run.keys`, runs `step` once they are all claimed, then completes them, or releases the
 * ones held when a claim, or the step, fails. Never rejects: a store failure or the step's error
 * is in the outcome. A release that fails leaves its lease to expire.
 *
 * @example
 * const ran = claimRun({ store, keys: ['ep:evt_1'], owner, leaseMs: 60_000, retentionMs }, () => handler(event, delivery))
 * const outcome = typeof ran === 'string' ? ran : await ran // 'done', 'completed', 'in_flight', ...
 */
export function claimRun(run: ClaimRun, step: () => unknown): ClaimRunOutcome | Promise<ClaimRunOutcome> {
  const { store, keys, owner, leaseMs } = run
  const count = store === undefined ? 0 : keys.length
  for (let held = 0; held < count; held++) {
    let found: ClaimResult | Promise<ClaimResult>
    try {
      // A synchronous throw is a store failure, as a rejection is (claimSlowly).
      found = store!.claim(keys[held]!, owner, leaseMs, run.deadline)
    } catch (error) {
      return release(run, held, { stage: 'claim', error })
    }
    if (typeof found !== 'string') return claimSlowly(run, step, held, found)
    if (found !== 'claimed') return release(run, held, found)
  }
  return runStep(run, step, count)
}

/** The rest of {@link claimRun} once a claim answered with a promise. */
async function claimSlowly(run: ClaimRun, step: () => unknown, held: number, first: Promise<ClaimResult>): Promise<ClaimRunOutcome> {
  const { store, keys, owner, leaseMs } = run
  let pending: ClaimResult | Promise<ClaimResult> | undefined = first
  for (; held < keys.length; held++) {
    let found: ClaimResult
    try {
      found = await (pending ?? store!.claim(keys[held]!, owner, leaseMs, run.deadline))
    } catch (error) {
      return release(run, held, { stage: 'claim', error })
    }
    pending = undefined
    if (found !== 'claimed') return release(run, held, found)
  }
  return runStep(run, step, keys.length)
}

/** Runs the step with `count` keys held. A step that returns no promise costs no turn of the event loop. */
function runStep(run: ClaimRun, step: () => unknown, count: number): ClaimRunOutcome | Promise<ClaimRunOutcome> {
  let ran: unknown
  try {
    ran = step()
  } catch (error) {
    return failed(run, count, error)
  }
  return isThenable(ran) ? settle(run, ran, count) : completeAll(run, count)
}

async function settle(run: ClaimRun, ran: PromiseLike<unknown>, count: number): Promise<ClaimRunOutcome> {
  try {
    await ran
  } catch (error) {
    // If releasing fails too, the lease expires and a retry runs the step then.
    return failed(run, count, error)
  }
  return completeAll(run, count)
}

/** A step that threw: its keys released, unless it was abandoned still running (see {@link AbandonedRun}). */
function failed(run: ClaimRun, count: number, error: unknown): Promise<ClaimRunOutcome> {
  if (!(error instanceof AbandonedRun)) return release(run, count, { stage: 'step', error })
  const { reason, running } = error
  // Held, not released: the keys end with the abandoned work, or with their lease if it never
  // settles. Its outcome has no one left to hear it, so neither path may reject.
  void Promise.resolve(running).then(
    () => completeAll(run, count),
    () => release(run, count, 'done'),
  ).then(undefined, () => undefined)
  return Promise.resolve({ stage: 'step', error: reason })
}

/**
 * Completes the first `count` keys. The step's work is done: every key is completed even when one
 * fails, and the last problem met is the outcome.
 */
function completeAll(run: ClaimRun, count: number, from = 0, outcome: ClaimRunOutcome = 'done'): ClaimRunOutcome | Promise<ClaimRunOutcome> {
  const { store, keys, owner, retentionMs } = run
  for (let i = from; i < count; i++) {
    let owned: boolean | Promise<boolean>
    try {
      owned = store!.complete(keys[i]!, owner, retentionMs, run.deadline)
    } catch (error) {
      outcome = { stage: 'complete', error }
      continue
    }
    if (typeof owned !== 'boolean') return completeSlowly(run, count, i, owned, outcome)
    // The lease ran out while the step ran, so another owner may have run it too.
    if (owned === false) outcome = 'lease_lost'
  }
  return outcome
}

async function completeSlowly(run: ClaimRun, count: number, at: number, pending: Promise<boolean>, outcome: ClaimRunOutcome): Promise<ClaimRunOutcome> {
  try {
    if ((await pending) === false) outcome = 'lease_lost'
  } catch (error) {
    outcome = { stage: 'complete', error }
  }
  return completeAll(run, count, at + 1, outcome)
}

/** Releases the first `count` keys, then answers `outcome`. A release that fails leaves the lease to expire. */
async function release(run: ClaimRun, count: number, outcome: ClaimRunOutcome): Promise<ClaimRunOutcome> {
  const { store, keys, owner } = run
  for (let i = 0; i < count; i++) await quietly(() => store!.release(keys[i]!, owner))
  return outcome
}
