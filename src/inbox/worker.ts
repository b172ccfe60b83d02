/**
 * `createInboxWorker`: runs the handlers of the deliveries a receiver accepted into an inbox
 * (DESIGN.md "Durable inbox"), in the shape of BullMQ's Worker and pg-boss's retry limits. It
 * takes deliveries under a lease and hands each to {@link processDelivery}, the one processing
 * path; it owns what is about the lease and the process:
 *
 * - the lease is renewed every third of `visibilityTimeoutMs` while a delivery is processed, and
 *   its end is known, so an ack the inbox did not answer is retried for as long as the lease lasts
 *   (a database blip during `complete` does not run the handler twice);
 * - a delivery handed out more than `maxStalledCount` times with no result is buried (BullMQ's
 *   stalled-job checker): one that takes its process down costs at most `maxStalledCount + 1`
 *   crashes. A delivery that was in a process when it crashed (a suspect) runs alone afterwards,
 *   the worker takes one delivery at a time at start and while suspects come, and it never holds
 *   a taken delivery unstarted while a suspect runs (a take's suspects after the first are given
 *   back), so a crash names its culprit rather than burying its neighbours with it;
 * - `handlerTimeoutMs` bounds a handler (pg-boss's `expireIn`);
 * - `stop()` hands back what it took but did not start and waits for what it started;
 * - lines go to `log`, as the receiver's do (DESIGN.md "Visible by default").
 */
import type { WebhookHandler, WebhookHandlers } from '../contracts/handler.js'
import { DEFAULT_RETENTION_MS, type IdempotencyStore } from '../contracts/store.js'
import { positiveOption } from '../option-checks.js'
import { MemoryStore } from '../stores/memory.js'
import { callHook, lineSink, startupWarnings, type WebhookLog } from '../visibility.js'
import type { WebhookTelemetry } from '../telemetry.js'
import { isInboxError, type InboxEntry, type WebhookInbox } from '../contracts/inbox.js'
import { processDelivery, type InboxWorkerResult, type ProcessPolicy } from './process.js'
import { errorLabel, printable } from '../log-window.js'
import type { EndpointWatch, EndpointWatcher, EndpointWatchView } from '../contracts/watch.js'
import type { ReplayResult, WebhookHistory } from '../history/types.js'
import type { OrderedEntry, OrderingEngine } from '../contracts/ordering.js'
import { OrderedTaker, resolveOrdering, type OrderingOption } from './ordering.js'
import { FlowGate, resolveRate, type RateLimit } from './flow.js'
import { ModeGate } from './worker-mode.js'

export { retryDelay, type InboxWorkerResult } from './process.js'

/** Options of {@link createInboxWorker}. */
export interface InboxWorkerOptions {
  /** The inbox the receiver appends to. */
  inbox: WebhookInbox
  /** Handlers by event type, called as `handler(event, delivery)`, as in the receiver; `delivery.signal` is aborted past the deadline. */
  on: WebhookHandlers
  /**
   * Guards each delivery id with claim → run → complete. A handler past `handlerTimeoutMs` keeps
   * its delivery's claim until it settles (or the claim's lease ends), so the retry meets
   * `in_flight` and never runs beside it. The claim lasts `handlerTimeoutMs + visibilityTimeoutMs`
   * (the longest a run and its ack can take), so it needs no renewal. The default holds claims in
   * this process; with workers in several processes, give them one shared store (`RedisStore`,
   * `PostgresStore`) so a retry taken by another process meets the claim too.
   * @default a `MemoryStore` of this worker's own
   */
  store?: IdempotencyStore
  /**
   * Handlers running at once. Size it for the slowest handlers: at 20 deliveries/s with one
   * handler in 50 taking 12 s, about 5 of those run at any moment (20 × 1/50 × 12).
   * @default 10
   */
  concurrency?: number
  /**
   * How long a taken delivery is hidden from other workers; renewed every third of it while the
   * handler runs, so only a crashed worker's deliveries are taken over. An ack the inbox does not
   * answer is retried until the lease ends.
   * @default 60000
   */
  visibilityTimeoutMs?: number
  /**
   * The longest a handler may run. Past it its `delivery.signal` is aborted, its slot is freed and
   * the delivery is retried by the backoff ("handler timed out after … ms"). A handler is not
   * waiting on the sender (the receiver answered 202 long ago), so this bounds a hung call, not a
   * slow one: 5 minutes is far beyond any sound handler and short enough that `concurrency` hung
   * handlers cannot stall the worker for long.
   * @default 300000 (5 min)
   */
  handlerTimeoutMs?: number
  /**
   * Hand-outs with no recorded result (the process crashed, was killed, or lost the lease) a
   * delivery may have before it is buried with the reason, so one that takes its process down
   * costs at most `maxStalledCount + 1` crashes. Healthy deliveries stall too (a deploy's kill -9,
   * an OOM caused by another delivery, a lost lease, a `stop()` that hands back): 3 tolerates a
   * couple of those without burying anything healthy, while a crash loop ends within seconds.
   * `0` buries at the first stall.
   * @default 3
   */
  maxStalledCount?: number
  /**
   * How long to wait before asking an empty inbox again.
   * @default 500
   */
  pollIntervalMs?: number
  /**
   * First retry delay; doubles on each failure up to `maxRetryDelayMs`.
   * @default 1000
   */
  firstRetryDelayMs?: number
  /**
   * Longest retry delay.
   * @default 3600000 (1 h)
   */
  maxRetryDelayMs?: number
  /**
   * How long after it was accepted (or requeued) a delivery is still retried; then it goes to the dead letters.
   * @default 259200000 (72 h)
   */
  maxRetryAgeMs?: number
  /**
   * Where the worker's lines go (startup warnings, a handler's first failure and every fifth, a
   * dead letter, an inbox that stops and starts answering): a function taking one line, or false
   * for none. Lines hold ids, names and error names, never the body or an error's message.
   * @default console.warn
   */
  log?: WebhookLog
  /** Called once per processed delivery. May be sync or async; a throw or a rejection is swallowed. */
  onResult?: (result: InboxWorkerResult) => unknown
  /**
   * Traces and metrics: `openTelemetry()` from `svc-webhooks/opentelemetry`, or your own. A
   * process span per delivery, in the trace of the span that received it; the inbox's figures as gauges.
   * @default none (nothing is called)
   */
  telemetry?: WebhookTelemetry
  /**
   * Called with each error of the inbox itself (take, an ack that could not be recorded): the
   * worker waits and goes on. May be sync or async; a throw or a rejection is swallowed.
   */
  onError?: (error: unknown) => unknown
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
  /**
   * Watch the endpoint through the service's API while the worker runs: `endpointWatcher({
   * service, endpointId, reenable })` from svc-webhooks/service; with `reenable: true` it is
   * enabled again once the inbox (and `store`) answers. Prefer the receiver's own `watch`, whose
   * readiness also checks the secret.
   * @default none (no call to the service)
   */
  watch?: EndpointWatcher
  /**
   * The history the receiver writes (the same engine): each run's outcome, attempts and error go
   * to the delivery's entry, and `replay(id)` reads it. Its outage never changes a result.
   * @default none
   */
  history?: WebhookHistory
  /**
   * Order within a conversation (DESIGN.md "Order within a conversation"): a key function of the
   * event (`byConversation`), or `{ key, strict }`. Deliveries with the same key run one at a
   * time in `message.created_at` order (then the time received), across every worker on the
   * inbox; different keys run concurrently up to `concurrency`. A failing delivery holds the later
   * ones of its key until it succeeds or is dead-lettered (`strict: false` lets them pass). One
   * older than a delivery of its key already processed still runs, with `delivery.late === true`.
   * Every worker on one inbox must use the same ordering. Needs MemoryInbox, RedisInbox or
   * PostgresInbox: any other inbox is a TypeError here. Given to the inbox instead
   * (`new RedisInbox({ client, ordering })`), the receivers file each delivery under its key as
   * they append it, and the worker takes the ordering from the inbox: ordered takes then place
   * nothing through the worker.
   * @default the inbox's `ordering`, else none (take order, up to `concurrency` at once)
   */
  ordering?: OrderingOption
  /**
   * Handler starts per second, shared by every worker on the same inbox (a token bucket kept in
   * the engine): protects a downstream quota. Needs MemoryInbox, RedisInbox or PostgresInbox.
   * @default none
   */
  rateLimit?: RateLimit
}

/** A running worker. */
export interface InboxWorker {
  /** Starts taking deliveries and logs the startup warnings. Calling it again does nothing. */
  start(): void
  /**
   * Stops taking deliveries: what a take in flight brings back, and what was taken but still
   * waits its turn (a suspect waiting to run alone), is handed back unrun (its lease ended at
   * once, so another worker takes it now), and the handlers already started are waited
   * for, at most `timeoutMs`. Past that their `delivery.signal` is aborted and `stop()` resolves;
   * their deliveries are taken over once their leases expire.
   */
  stop(timeoutMs?: number): Promise<void>
  /** Deliveries being processed now. */
  readonly active: number
  /** The service's view of the endpoint while the worker runs with `watch`. */
  readonly endpoint: EndpointWatchView | undefined
  /**
   * Runs a delivery kept in `history` through its handler again, on purpose, bypassing the
   * dedupe record and the inbox; rejects with a `ReplayError` when it cannot (see the receiver's).
   */
  replay(id: string, endpoint?: string): Promise<ReplayResult>
  /** The `history` option, if any. */
  readonly history: WebhookHistory | undefined
  /** The inbox, for the console (dead letters, stats). */
  readonly inbox: WebhookInbox
  /**
   * Pauses every worker on this inbox (the flag is kept in the engine): no delivery starts until
   * `resume()`; those running finish; receivers keep answering 202. `by` (who paused) is logged
   * once by each worker and shown in `inbox.stats()`.
   */
  pause(by?: string): Promise<void>
  /** Lets every worker on this inbox start deliveries again. */
  resume(): Promise<void>
}

const DEFAULTS = {
  concurrency: 10,
  visibilityTimeoutMs: 60_000,
  handlerTimeoutMs: 5 * 60 * 1000,
  pollIntervalMs: 500,
  firstRetryDelayMs: 1_000,
  maxRetryDelayMs: 60 * 60 * 1000,
  maxRetryAgeMs: DEFAULT_RETENTION_MS,
}
const DEFAULT_MAX_STALLED_COUNT = 3
/** An unanswered ack is tried again after 100 ms, doubling up to 2 s, while the lease lasts. */
const ACK_FIRST_RETRY_MS = 100
const ACK_MAX_RETRY_MS = 2_000
const ACK_LAST_TRY_MS = 20
/** The longest pause between takes while the inbox does not answer. */
const MAX_TAKE_PAUSE_MS = 30_000

/** How long a delivery handed out to be placed stays leased to its placer. */
const PLACE_LEASE_MS = 5_000
/**
 * Heads of one key a worker runs in a row through `completeNext` before its key goes back to the
 * takes: a conversation that keeps getting messages does not keep a slot from the keys waiting.
 */
const MAX_CHAIN = 16

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const yieldToEventLoop = (): Promise<void> =>
  new Promise((resolve) => ((globalThis as { setImmediate?: (f: () => void) => void }).setImmediate ?? setTimeout)(resolve))

/** Handlers for every event type that fail with `error` (a key function that failed for this delivery). */
function failingHandlers(error: Error): Record<string, WebhookHandler<unknown> | undefined> {
  const fail: WebhookHandler<unknown> = () => {
    throw error
  }
  const descriptor = { value: fail, writable: false, enumerable: true, configurable: true }
  return new Proxy({}, { get: () => fail, getOwnPropertyDescriptor: () => descriptor, has: () => true })
}

/** Hand-outs of `entry` before this one that ended with no recorded result. */
function stalledTakes(entry: InboxEntry): number {
  const stalled = entry.takes - entry.attempts - 1
  // An engine that does not count hand-outs (`takes` missing) cannot tell.
  return Number.isFinite(stalled) && stalled > 0 ? stalled : 0
}

/**
 * A taken entry's lease: renewed every third of the visibility timeout until it ends, with its
 * expiry known (counted from when the take or the extend was asked, the safe side), so an ack
 * is retried only while the lease still protects the delivery.
 */
class Lease {
  expiresAt: number
  /** Aborted when the lease is lost or the worker gives up waiting: the handler's signal follows it. */
  readonly controller = new AbortController()
  private readonly timer: ReturnType<typeof setInterval>
  private renewing = false

  constructor(
    private readonly entry: InboxEntry,
    private readonly inbox: WebhookInbox,
    private readonly visibilityMs: number,
    private readonly now: () => number,
    takenAt: number,
  ) {
    this.expiresAt = takenAt + visibilityMs
    this.timer = setInterval(() => void this.renew(), Math.max(1, Math.floor(visibilityMs / 3)))
  }

  private async renew(): Promise<void> {
    // An extend the inbox has not answered yet is not doubled up.
    if (this.renewing) return
    this.renewing = true
    const askedAt = this.now()
    try {
      if (await this.inbox.extend(this.entry, this.visibilityMs)) this.expiresAt = Math.max(this.expiresAt, askedAt + this.visibilityMs)
      // false: another worker holds it now. The handler is told through its signal; its result
      // will not be recorded (the ack answers false too).
      else this.lose()
    } catch {
      // Unanswered: the expiry stays where the last answered renewal put it.
    } finally {
      this.renewing = false
    }
  }

  lose(): void {
    this.end()
    this.controller.abort(Object.assign(new Error('the lease on this delivery was lost: another worker may run it'), { name: 'LeaseLostError' }))
  }

  end(): void {
    clearInterval(this.timer)
  }

  /**
   * Runs an ack, trying it again while the inbox is unavailable and the lease lasts: the engine
   * makes a repeat by the same lease idempotent, so a reply lost in a dropped connection is
   * harmless. A `refused` error is not retried (it would be refused again).
   */
  async ack(call: () => Promise<boolean>): Promise<boolean> {
    for (let wait = ACK_FIRST_RETRY_MS; ; wait = Math.min(wait * 2, ACK_MAX_RETRY_MS)) {
      try {
        return await call()
      } catch (error) {
        if (isInboxError(error) && error.kind === 'refused') throw error
        // Never wait past the lease: the next try comes at most halfway to its end (a renewal
        // meanwhile moves the end), and none is made in its last few milliseconds.
        const left = this.expiresAt - this.now()
        if (left < ACK_LAST_TRY_MS) throw error
        await sleep(Math.min(wait, left / 2))
      }
    }
  }
}

/**
 * Admission to run: a suspect (a delivery that was in a process when it crashed) runs alone, the
 * rest together, first come first served. After one crash every delivery that was running is a
 * suspect; run one at a time, the next crash is the culprit's alone, so its neighbours complete
 * instead of stalling with it toward `maxStalledCount`.
 */
class SuspectGate {
  private running = 0
  private alone = false
  private readonly waiting: { solo: boolean; go: (admitted: boolean) => void }[] = []

  /** Resolves true once admitted (then `leave` must follow), false when turned away by {@link turnAway}. */
  enter(solo: boolean): Promise<boolean> {
    return new Promise((go) => {
      this.waiting.push({ solo, go })
      this.admit()
    })
  }

  /** Sends every waiting entry away unadmitted (the worker is stopping). */
  turnAway(): void {
    for (const next of this.waiting.splice(0)) next.go(false)
  }

  leave(solo: boolean): void {
    if (solo) this.alone = false
    else this.running--
    this.admit()
  }

  private admit(): void {
    for (let next = this.waiting[0]; next !== undefined; next = this.waiting[0]) {
      if (this.alone || (next.solo && this.running > 0)) return
      this.waiting.shift()
      if (next.solo) this.alone = true
      else this.running++
      next.go(true)
      if (next.solo) return
    }
  }
}

/**
 * Creates a worker over an inbox. Run it in the receiver's process or apart, as many as you like:
 * the inbox's leases make each delivery run on one worker at a time.
 *
 * @example
 * const worker = createInboxWorker({ inbox, on: { 'message.received': async (event) => saveMessage(event.message) } })
 * worker.start()
 * process.on('SIGTERM', () => worker.stop().then(() => process.exit(0)))
 */
export function createInboxWorker(options: InboxWorkerOptions): InboxWorker {
  const { inbox, on, store, onResult, onError, now = Date.now } = options
  const settings = { ...DEFAULTS }
  for (const name of Object.keys(DEFAULTS) as (keyof typeof DEFAULTS)[]) {
    const value = options[name]
    if (value !== undefined) {
      positiveOption(value, `createInboxWorker \`${name}\``)
      settings[name] = value
    }
  }
  const { maxStalledCount = DEFAULT_MAX_STALLED_COUNT } = options
  if (!Number.isInteger(maxStalledCount) || maxStalledCount < 0) throw new TypeError('svc-webhooks: createInboxWorker `maxStalledCount` must be a whole number, 0 or more.')
  if (typeof inbox?.take !== 'function') throw new TypeError('svc-webhooks: createInboxWorker needs `inbox` (MemoryInbox, RedisInbox, PostgresInbox).')
  if (typeof on !== 'object' || on === null) throw new TypeError('svc-webhooks: createInboxWorker needs `on`, the handlers by event type.')
  const { telemetry } = options
  if (telemetry !== undefined && (typeof telemetry?.receive !== 'function' || typeof telemetry.process !== 'function')) {
    throw new TypeError('svc-webhooks: createInboxWorker `telemetry` must be a WebhookTelemetry, e.g. openTelemetry() from svc-webhooks/opentelemetry.')
  }
  if (options.watch !== undefined && typeof options.watch?.start !== 'function') {
    throw new TypeError('svc-webhooks: createInboxWorker `watch` must be endpointWatcher({ service, endpointId }) from svc-webhooks/service.')
  }
  let watching: EndpointWatch | undefined
  /** Every line of the worker goes out here, and only here. */
  const lines = lineSink(options.log, 'inbox worker', now)
  const inboxError = (error: unknown): void => callHook(onError, error)
  const { history } = options
  if (history !== undefined && typeof history?.processed !== 'function') throw new TypeError('svc-webhooks: createInboxWorker `history` must be a MemoryHistory, RedisHistory or PostgresHistory.')
  const ordering = resolveOrdering(options.ordering, inbox)
  const rate = resolveRate(options.rateLimit, inbox)
  const flow = new FlowGate(inbox, rate, lines.once)
  // A worker that dies while placing holds up every key's heads for this long: kept short.
  const taker = ordering && new OrderedTaker(inbox as unknown as OrderingEngine, ordering, Math.min(PLACE_LEASE_MS, settings.visibilityTimeoutMs), (inbox as { ordering?: unknown }).ordering !== undefined)
  // An engine that completes a head and leases its key's next one in one round trip; not under a
  // rate limit, whose tokens only a take's admission draws.
  const engine = inbox as unknown as Partial<OrderingEngine>
  const chainer = taker && !rate && typeof engine.completeNext === 'function' ? (engine as Required<Pick<OrderingEngine, 'completeNext'>>) : undefined
  // Ordered and unordered workers never run side by side on one inbox (see worker-mode.ts).
  const mode = new ModeGate(inbox, ordering ? 'ordered' : 'unordered', settings.visibilityTimeoutMs, (text) => lines.say('mixed_ordering', text), inboxError)

  const policy: ProcessPolicy = {
    handlers: on as Record<string, WebhookHandler<unknown> | undefined>,
    // Never none: without a claim a handler past its deadline would run again beside itself.
    store: store ?? new MemoryStore(),
    storeKey: (delivery) => delivery.keys[0]!,
    claimMs: settings.handlerTimeoutMs + settings.visibilityTimeoutMs,
    retentionMs: DEFAULT_RETENTION_MS,
    handlerTimeoutMs: settings.handlerTimeoutMs,
    maxStalledCount,
    firstRetryDelayMs: settings.firstRetryDelayMs,
    maxRetryDelayMs: settings.maxRetryDelayMs,
    maxRetryAgeMs: settings.maxRetryAgeMs,
    now,
    report: (result) => {
      try {
        history?.processed(result, now())
      } catch {
        // A history of your own that throws: the result stands.
      }
      callHook(onResult, result)
    },
    say: lines.say,
    inboxError,
    ...(telemetry && { telemetry }),
  }
  telemetry?.observe?.('worker', async () => ({ inbox: await inbox.stats() }))

  let started = false
  let running = false
  let loop: Promise<void> | undefined
  let wake: (() => void) | undefined
  const active = new Set<Promise<void>>()
  const leases = new Set<Lease>()
  const gate = new SuspectGate()
  /** Ordered heads whose key function fails: their run is that failure. */
  const keyErrors = new WeakMap<InboxEntry, Error>()

  function pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        wake = undefined
        resolve()
      }
      wake = done
    })
  }

  /** A suspect still allowed to run: it runs alone (one past `maxStalledCount` is buried unrun). */
  const runsAlone = (entry: InboxEntry): boolean => {
    const stalled = stalledTakes(entry)
    return stalled > 0 && stalled <= maxStalledCount
  }

  /** `chained`: heads of its key run in a row before this one through `completeNext`. */
  function begin(entry: InboxEntry, takenAt: number, chained = 0): void {
    const lease = new Lease(entry, inbox, settings.visibilityTimeoutMs, now, takenAt)
    leases.add(lease)
    const stalled = stalledTakes(entry)
    const solo = runsAlone(entry)
    /** The next head of its key, leased to this worker by its completion. */
    let next: { entry: OrderedEntry; takenAt: number } | undefined
    const ordered = chainer && (entry as Partial<OrderedEntry>).orderKey !== undefined ? (entry as OrderedEntry) : undefined
    const complete = ordered
      ? async () => {
          const askedAt = now()
          const done = await chainer!.completeNext(ordered, settings.visibilityTimeoutMs, running && chained < MAX_CHAIN)
          // A repeat after a lost reply brings back the same next head.
          if (done.next) next = { entry: done.next, takenAt: askedAt }
          return done.done
        }
      : () => inbox.complete(entry)
    const acks = {
      complete: () => lease.ack(complete),
      retry: (delayMs: number, error: string) => lease.ack(() => inbox.retry(entry, delayMs, error)),
      bury: (error: string) => lease.ack(() => inbox.bury(entry, error)),
    }
    const job = { delivery: entry, attempts: entry.attempts + 1, stalled, retriesSince: entry.retriesSince ?? entry.receivedAt, owner: entry.lease, acks, abort: lease.controller.signal }
    const keyError = keyErrors.get(entry)
    // A key function that fails is this delivery's failure, through the one processing path.
    const jobPolicy = keyError ? { ...policy, handlers: failingHandlers(keyError) } : policy
    const task: Promise<void> = (async () => {
      const admitted = await gate.enter(solo)
      // stop() came while this entry waited its turn: it was taken but never started, so it is
      // handed back unrun like what a take in flight brings (another worker takes it now).
      if (!admitted || !running) {
        if (admitted) gate.leave(solo)
        // No renewal may land after the hand-back and hide the entry again.
        lease.end()
        return handBack(entry)
      }
      try {
        await processDelivery(job, jobPolicy)
      } finally {
        gate.leave(solo)
      }
    })()
      .catch(inboxError)
      .finally(() => {
        lease.end()
        leases.delete(lease)
        active.delete(task)
        // The next head its completion leased runs in its slot, or goes back when stop() came
        // meanwhile (stop() waits for this task, so for the hand-back too).
        if (next) {
          if (running) begin(next.entry, next.takenAt, chained + 1)
          else return handBack(next.entry)
        } else if (taker) {
          // Its key may have a next head now: the next take looks at it at once.
          taker.finished(entry)
          wake?.()
        }
      })
    active.add(task)
  }

  /**
   * Gives a taken entry back unrun, due again at once. Ending the lease (`extend(entry, 0)`)
   * records nothing: the hand-out counts as one without a result toward `maxStalledCount`. An
   * engine that refuses a 0 ms lease gets a retry due now instead, which counts an attempt (and
   * keeps the last error) rather than a stall. Either failing, the lease simply expires.
   */
  async function handBack(entry: InboxEntry): Promise<void> {
    try {
      if (await inbox.extend(entry, 0)) return
    } catch {
      await inbox.retry(entry, 0, entry.lastError ?? 'handed back unrun: the worker stopped').catch(() => false)
    }
  }

  /**
   * Gives a taken suspect back unrun, due again at once, because another suspect of the same take
   * runs first: as a retry, which counts an attempt (keeping the last error) rather than a stall
   * on every engine. Held until its turn, it would be charged a stall each time the suspect before
   * it takes the process down, and buried after `maxStalledCount` crashes that were not its own.
   */
  async function giveBack(entry: InboxEntry): Promise<void> {
    await inbox.retry(entry, 0, entry.lastError ?? 'handed back unrun: deliveries suspected of a crash run one at a time').catch(inboxError)
  }

  /**
   * What of a take starts, and what is given back: every delivery but the suspects after the first.
   * The others run together at once, the one suspect alone after them (the take loop takes nothing
   * more meanwhile), so no delivery waits taken while a suspect runs: a crash then is charged to
   * what was running, not to what waited its turn behind the culprit.
   */
  function split(entries: InboxEntry[]): { start: InboxEntry[]; back: InboxEntry[] } {
    const suspects = entries.filter(runsAlone)
    if (suspects.length === 0) return { start: entries, back: [] }
    return { start: [...entries.filter((entry) => !runsAlone(entry)), suspects[0]!], back: suspects.slice(1) }
  }

  /**
   * A take through the flow gate (the pause flag, the shared rate) and, with `ordering`, the
   * ordered take; `waitMs` says when to ask again when it brings nothing.
   */
  async function takeSome(want: number): Promise<{ entries: InboxEntry[]; waitMs?: number }> {
    const { granted, waitMs } = await flow.admit(want)
    if (granted <= 0) return { entries: [], waitMs }
    let entries: InboxEntry[]
    let wait: number | undefined
    try {
      if (taker) {
        const taken = await taker.take(granted, settings.visibilityTimeoutMs)
        entries = taken.run.map(({ entry, keyError }) => {
          if (keyError) keyErrors.set(entry, keyError)
          return entry
        })
        wait = taken.waitMs
      } else entries = await inbox.take(granted, settings.visibilityTimeoutMs)
    } catch (error) {
      await flow.refund(granted)
      throw error
    }
    await flow.refund(granted - entries.length)
    if (entries.length > 0 && !(await flow.open().catch(() => true))) {
      await Promise.all(entries.map(handBack))
      return { entries: [], waitMs: 0 }
    }
    return { entries, ...(wait !== undefined && { waitMs: wait }) }
  }

  async function run(): Promise<void> {
    let wait = settings.pollIntervalMs
    let failedTakes = 0
    // One delivery at a time at start and while suspects come: a process started after a crash
    // must not take healthy deliveries and hold them behind the culprit when it crashes again
    // (each such hand-out would count toward their maxStalledCount too).
    let cautious = true
    while (running) {
      const free = settings.concurrency - active.size
      // Cautious, one at a time: the next take waits until the last one's delivery is done.
      if (free <= 0 || (cautious && active.size > 0)) {
        await Promise.race(active)
        continue
      }
      if (!(await mode.allowed())) {
        if (running) await pause(settings.pollIntervalMs)
        continue
      }
      let entries: InboxEntry[]
      let waitMs: number | undefined
      const askedAt = now()
      try {
        ;({ entries, waitMs } = await takeSome(cautious ? 1 : free))
      } catch (error) {
        inboxError(error)
        // One line when the inbox stops answering and one when it is back, not one per poll.
        if (++failedTakes === 1) {
          const refused = isInboxError(error) && error.kind === 'refused'
          lines.say(
            'inbox_unavailable',
            `the inbox ${refused ? 'refused' : 'did not answer'} a take (${errorLabel(error)}): deliveries wait in it, none is lost. ` +
              `Trying again with backoff up to every ${MAX_TAKE_PAUSE_MS / 1000} s.`,
          )
        }
        if (running) await pause(wait)
        wait = Math.min(wait * 2, MAX_TAKE_PAUSE_MS)
        continue
      }
      wait = settings.pollIntervalMs
      if (failedTakes > 0) {
        lines.say('inbox_back', `the inbox answers again, after ${failedTakes} failed take(s).`)
        failedTakes = 0
      }
      if (!running) {
        // stop() was called while this take was on its way: hand the entries back unrun.
        await Promise.all(entries.map(handBack))
        break
      }
      if (entries.length > 0) cautious = entries.some((entry) => stalledTakes(entry) > 0)
      const { start, back } = split(entries)
      for (const entry of start) begin(entry, askedAt)
      if (back.length > 0) await Promise.all(back.map(giveBack))
      if (entries.length === 0) await pause(waitMs ?? settings.pollIntervalMs)
      // An inbox that answers without I/O (in memory) must not starve timers and sockets.
      else await yieldToEventLoop()
    }
  }

  function warnAtStart(): void {
    for (const line of startupWarnings(on, undefined)) lines.once(line)
    Promise.resolve()
      .then(() => inbox.durabilityWarnings?.())
      .then(
        (warnings) => {
          // The engine's own lines name it ("svc-webhooks: RedisInbox: ..."); escaped all the same.
          for (const line of warnings ?? []) lines.once(printable(line, 500))
        },
        () => undefined,
      )
  }

  return {
    start() {
      if (running) return
      if (!started) warnAtStart()
      started = true
      running = true
      mode.start()
      loop = run()
      if (options.watch) watching = options.watch.start({ inbox, ...(store && { store }) }, lines.once)
    },
    async stop(timeoutMs = settings.visibilityTimeoutMs) {
      running = false
      watching?.stop()
      wake?.()
      // A suspect waiting to run alone is handed back now, not after the handlers before it end.
      gate.turnAway()
      let timer: ReturnType<typeof setTimeout> | undefined
      let timedOut = false
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(() => resolve(void (timedOut = true)), timeoutMs)))
      // The loop first: a take in flight may still end in hand-backs, and it starts nothing new.
      await Promise.race([(async () => {
        await loop
        await Promise.all(active)
      })(), timeout])
      clearTimeout(timer)
      await mode.stop()
      if (timedOut) for (const lease of leases) lease.controller.abort(Object.assign(new Error('the worker stopped before this handler finished'), { name: 'AbortError' }))
      lines.flush()
    },
    get active() {
      return active.size
    },
    get endpoint() {
      return watching?.view()
    },
    history,
    inbox,
    replay: (id, name) =>
      history ? history.replay({ handlers: on, now, timeoutMs: settings.handlerTimeoutMs }, id, name) : Promise.reject(new TypeError('svc-webhooks: replay needs the `history` option.')),
    async pause(by?: string) {
      await flow.set(true, by)
    },
    async resume() {
      await flow.set(false)
    },
  }
}
