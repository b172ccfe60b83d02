/**
 * One taken delivery, start to end: the only place a handler runs for the inbox worker and for
 * the Cloudflare Queues consumer (as BullMQ's `Worker.processJob`). Parse → stalled check →
 * store claim (optional) → the handler under its deadline → record the result (complete, retry
 * with backoff, or bury). The caller supplies the acks: the worker's are inbox calls retried for
 * as long as the lease lasts, the consumer's are the Queue message's `ack()`/`retry()`.
 */
import { decodeUtf8 } from '#crypto'
import type { WebhookEvent } from '../events.js'
import type { WebhookHandler } from '../contracts/handler.js'
import { AbandonedRun, claimRun } from '../claim.js'
import type { IdempotencyStore } from '../contracts/store.js'
import type { VerifiedDelivery } from '../verify.js'
import type { InboxDelivery } from '../contracts/inbox.js'
import type { TelemetryScope, WebhookTelemetry } from '../telemetry.js'
import { errorLabel, printable } from '../log-window.js'
import { storable, storedError } from './text.js'

/** How one taken delivery ended, for logging and metrics. Never holds the body. */
export interface InboxWorkerResult {
  /**
   * - `processed`: the handler succeeded and the inbox recorded it.
   * - `ignored`: no handler for its type (completed without running).
   * - `retrying`: the handler failed (or timed out); due again in `retryInMs`.
   * - `dead`: out of retries, handed out too often without a result, or stored corrupt: in the dead letters.
   * - `duplicate`: the `store` says another run already processed it (completed without running).
   * - `in_flight`: the `store` says another run holds it; looked at again later.
   * - `lease_lost`: the inbox answered that this worker no longer held the delivery (its lease
   *   expired and another worker took it): the result was not recorded here.
   * - `unrecorded`: the result could not be recorded: the inbox refused the ack (`error` is an
   *   `InboxError` of kind `refused`) or stayed unavailable until the lease ran out. The delivery
   *   is handed out again once its lease expires.
   */
  outcome: 'processed' | 'ignored' | 'retrying' | 'dead' | 'duplicate' | 'in_flight' | 'lease_lost' | 'unrecorded'
  id: string
  endpoint: string
  eventType?: string
  /** Handler attempts made so far, this one included. */
  attempts: number
  /** The handler's error (retrying, dead), or why the result was not recorded (unrecorded). */
  error?: unknown
  /** With `retrying`: when it is due again, in milliseconds from now. */
  retryInMs?: number
  durationMs: number
}

/**
 * Records a result. Each resolves true once recorded, false when the delivery is no longer ours
 * (the lease was lost), and rejects when it could not be recorded.
 */
export interface Acks {
  complete(): Promise<boolean>
  retry(delayMs: number, error: string): Promise<boolean>
  /** Absent where the engine dead-letters on its own (a Queue after `max_retries`): retried with backoff instead. */
  bury?(error: string): Promise<boolean>
}

/** One taken delivery, as the worker or the Queues consumer hands it to {@link processDelivery}. */
export interface Job {
  delivery: InboxDelivery
  /** Handler attempts, this one included. */
  attempts: number
  /** Hand-outs before this one that ended with no recorded result (a crash, a kill, a lost lease). */
  stalled: number
  /** Where the retry budget counts from (receivedAt, or the last requeue), in ms since the epoch. */
  retriesSince: number
  /** The store claim's owner: unique to this hand-out. */
  owner: string
  acks: Acks
  /** Aborted from outside (the lease lost, `stop()` giving up): the handler's signal follows it. */
  abort?: AbortSignal
}

/** The policy {@link processDelivery} applies, built once per worker or consumer. */
export interface ProcessPolicy {
  handlers: Record<string, WebhookHandler<unknown> | undefined>
  store?: IdempotencyStore
  /** The store key of a delivery. */
  storeKey: (delivery: InboxDelivery) => string
  /** How long a store claim lasts: at least the handler's deadline. */
  claimMs: number
  retentionMs: number
  handlerTimeoutMs: number
  /** Hand-outs without a result tolerated before a delivery is buried (Infinity: the engine bounds them). */
  maxStalledCount: number
  firstRetryDelayMs: number
  maxRetryDelayMs: number
  maxRetryAgeMs: number
  /** How long until a delivery the store says is in flight is looked at again (undefined: the backoff). */
  inFlightDelayMs?: number
  now: () => number
  report: (result: InboxWorkerResult) => void
  /**
   * One log line (the caller prefixes it), of a fixed `kind` (`handler_failed`, `dead`,
   * `unrecorded`, `lease_lost`): repeats of a kind are collapsed into a summary per window.
   */
  say: (kind: string, line: string, id?: string) => void
  /** An inbox error the caller's `onError` hears about. */
  inboxError: (error: unknown) => void
  /** A process span per delivery, in the trace of the span that received it. */
  telemetry?: WebhookTelemetry
}

/** The retry delay after `attempts` failures: `first * 2^(attempts - 1)`, capped. */
export function retryDelay(attempts: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(Math.max(attempts, 1) - 1, 40))
}

/** An error with a name of its own, so stored text and log lines say what happened. */
function namedError(name: string, message: string): Error {
  const error = new Error(message)
  error.name = name
  return error
}

/** Handler failures are logged on the first attempt and then every fifth: a streak, not a flood. */
const logsFailure = (attempts: number): boolean => attempts === 1 || attempts % 5 === 0

/** Parses a stored body: an object with a string `event`, as the receiver verified it. */
function parse(rawBody: Uint8Array): WebhookEvent {
  const event = JSON.parse(decodeUtf8(rawBody)) as unknown
  if (typeof event !== 'object' || event === null || typeof (event as { event?: unknown }).event !== 'string') {
    throw new TypeError('the stored body is not a JSON object with a string "event"')
  }
  return event as WebhookEvent
}

type Settled = { ok: true } | { ok: false; error: unknown; running?: Promise<unknown> }

/**
 * Runs the handler until it settles or its deadline passes. Past the deadline the run is
 * abandoned (its promise is no longer awaited, so the worker's slot is free) and its signal
 * aborted; `running` is the handler's own promise, which the store claim follows to its end.
 */
function runWithDeadline(
  handler: WebhookHandler<unknown>,
  event: WebhookEvent,
  delivery: VerifiedDelivery<unknown>,
  controller: AbortController,
  timeoutMs: number,
  scope: TelemetryScope | undefined,
): Promise<Settled> {
  return new Promise<Settled>((resolve) => {
    // The deadline counts from before the handler is called (its synchronous part included).
    const timer = setTimeout(() => {
      const error = namedError('TimeoutError', `handler timed out after ${timeoutMs} ms`)
      controller.abort(error)
      resolve({ ok: false, error, running })
    }, timeoutMs)
    const settle = (result: Settled) => {
      clearTimeout(timer)
      resolve(result)
    }
    // A handler that throws synchronously is a failure like a rejection.
    const running = new Promise<unknown>((run) => run(scope ? scope.run(() => handler(event, delivery)) : handler(event, delivery)))
    running.then(
      () => settle({ ok: true }),
      (error: unknown) => settle({ ok: false, error }),
    )
  })
}

/**
 * Processes one taken delivery and reports how it ended; never rejects.
 *
 * @example
 * await processDelivery({ delivery, attempts: 1, stalled: 0, retriesSince: delivery.receivedAt, owner, acks }, policy)
 */
export async function processDelivery(job: Job, policy: ProcessPolicy): Promise<void> {
  const { delivery, attempts, acks } = job
  const { now, store } = policy
  const started = now()
  const where = `delivery ${printable(delivery.id)}${delivery.endpoint && delivery.endpoint !== 'default' ? `, endpoint ${printable(delivery.endpoint)}` : ''}`
  /** What the report says of the event, once the body is parsed. */
  const known: { eventType?: string } = {}
  const scope = policy.telemetry?.process({ id: delivery.id, endpoint: delivery.endpoint, ...(delivery.traceparent ? { traceparent: delivery.traceparent } : {}) })
  const done = (outcome: InboxWorkerResult['outcome'], more: Partial<InboxWorkerResult> = {}): void => {
    const result: InboxWorkerResult = { id: delivery.id, endpoint: delivery.endpoint, ...known, attempts, outcome, ...more, durationMs: now() - started }
    scope?.end(result)
    policy.report(result)
  }

  /** Records a result; a rejection becomes an `unrecorded` report. Resolves the ack's answer, or undefined when it failed. */
  async function record(ack: () => Promise<boolean>): Promise<boolean | undefined> {
    try {
      return await ack()
    } catch (error) {
      policy.inboxError(error)
      const refused = (error as { kind?: unknown }).kind === 'refused'
      policy.say(
        'unrecorded',
        `could not record the result of ${where}: the inbox ${refused ? 'refused it' : 'stayed unavailable for as long as the lease lasted'} ` +
          `(${errorLabel(error)}). It is handed out again once its lease expires.`,
        delivery.id,
      )
      done('unrecorded', { error })
      return undefined
    }
  }

  /** Dead-letters with `stored` as its lastError; `why` is the log line's safe summary. */
  async function bury(stored: string, why: string, error: unknown): Promise<void> {
    if (!acks.bury) return retry(error)
    const owned = await record(() => acks.bury!(storable(stored)))
    if (owned === undefined) return
    if (!owned) return leaseLost()
    policy.say('dead', `${where} went to the dead letters: ${why}. Requeue it with inbox.requeue(key) once the cause is fixed.`, delivery.id)
    done('dead', { error })
  }

  async function retry(error: unknown, delayMs = retryDelay(attempts, policy.firstRetryDelayMs, policy.maxRetryDelayMs)): Promise<void> {
    const owned = await record(() => acks.retry(delayMs, storedError(error)))
    if (owned === undefined) return
    if (!owned) return leaseLost()
    done('retrying', { error, retryInMs: delayMs })
  }

  function leaseLost(): void {
    policy.say('lease_lost', `lost the lease on ${where} before its result was recorded: another worker may run it again. Raise \`visibilityTimeoutMs\` if the inbox is slow to answer.`, delivery.id)
    done('lease_lost')
  }

  let event: WebhookEvent
  try {
    event = parse(delivery.rawBody)
  } catch (error) {
    // The body was verified and parsed when accepted: one that no longer parses is corrupt storage.
    const why = `the stored body is not a delivery (${errorLabel(error)})`
    return bury(why, why, error)
  }
  known.eventType = event.event

  // A delivery handed out again and again with no result is taking its process down (an
  // uncaught throw in a callback, OOM): run it once more and it would crash again.
  if (job.stalled > policy.maxStalledCount) {
    const reason = `handed out ${job.stalled + 1} times without a result: the handler may be crashing the process`
    return bury(reason, reason, namedError('StalledError', reason))
  }

  const handler = Object.hasOwn(policy.handlers, event.event) ? policy.handlers[event.event] : undefined
  if (handler === undefined) {
    const owned = await record(() => acks.complete())
    if (owned !== undefined) done(owned ? 'ignored' : 'lease_lost')
    return
  }

  const outside = job.abort
  /** Set when the run was aborted from outside before the handler started. */
  let abortedBefore = false
  // The store claim (optional) → the handler under its deadline → the store completion, as the
  // receiver's request path runs them (claim.ts); the inbox acks below are this engine's part.
  const outcome = await claimRun(
    { store, keys: store ? [policy.storeKey(delivery)] : [], owner: job.owner, leaseMs: policy.claimMs, retentionMs: policy.retentionMs },
    async () => {
      if (outside?.aborted) {
        // Aborted before the handler started (the lease lost, the engine took the job back, the
        // worker gave up waiting): never start it.
        abortedBefore = true
        throw outside.reason
      }
      const controller = new AbortController()
      const follow = () => controller.abort(outside?.reason)
      outside?.addEventListener('abort', follow, { once: true })
      const { id, timestamp, signatureVersion, secretIndex, rawBody } = delivery
      const verified: VerifiedDelivery<unknown> = { id, timestamp, signatureVersion, secretIndex, rawBody, event, signal: controller.signal, ...((delivery as { late?: boolean }).late === true && { late: true }) }
      const settled = await runWithDeadline(handler, event, verified, controller, policy.handlerTimeoutMs, scope)
      outside?.removeEventListener('abort', follow)
      // Past its deadline the handler may still be doing its work: the store claim stays held
      // until it settles, so a retry meets `in_flight` and never runs beside it.
      if (!settled.ok) throw settled.running ? new AbandonedRun(settled.error, settled.running) : settled.error
    },
  )

  if (outcome === 'completed') {
    const owned = await record(() => acks.complete())
    if (owned !== undefined) done(owned ? 'duplicate' : 'lease_lost')
    return
  }
  if (outcome === 'in_flight') {
    const delayMs = policy.inFlightDelayMs ?? retryDelay(attempts, policy.firstRetryDelayMs, policy.maxRetryDelayMs)
    const owned = await record(() => acks.retry(delayMs, 'another run holds this delivery in the store'))
    if (owned !== undefined) done(owned ? 'in_flight' : 'lease_lost', owned ? { retryInMs: delayMs } : {})
    return
  }
  if (typeof outcome === 'string' || outcome.stage === 'complete') {
    // The handler's work is done: record it in the inbox even when the store could not (its claim then expires).
    const owned = await record(() => acks.complete())
    if (owned === undefined) return
    if (!owned) return leaseLost()
    return done(outcome === 'lease_lost' ? 'lease_lost' : 'processed', typeof outcome === 'string' ? {} : { error: outcome.error })
  }
  // The store is down: the handler must not run unguarded. Not the handler's failure, but
  // retried by the same backoff, so a long store outage cannot spin.
  if (outcome.stage === 'claim') return retry(outcome.error)
  // Due again at once; the ack answers false when the delivery is no longer ours.
  if (abortedBefore) return retry(outcome.error, 0)

  const failure = outcome.error
  const delayMs = retryDelay(attempts, policy.firstRetryDelayMs, policy.maxRetryDelayMs)
  const exhausted = now() + delayMs - job.retriesSince > policy.maxRetryAgeMs
  if (logsFailure(attempts) && !exhausted) {
    policy.say(
      'handler_failed',
      `the "${printable(event.event, 60)}" handler failed for ${where}, attempt ${attempts}: ${errorLabel(failure)}; retried in ${delayMs} ms. ` +
        'The error is in onResult and kept as the delivery\'s lastError.',
      delivery.id,
    )
  }
  if (exhausted) return bury(storedError(failure), `out of retries after ${attempts} attempt(s), the last failing with ${errorLabel(failure)}`, failure)
  return retry(failure, delayMs)
}
