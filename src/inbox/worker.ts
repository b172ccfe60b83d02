/**
 * `createInboxWorker`: runs the handlers of the deliveries a receiver accepted into an inbox
 * (DESIGN.md "Durable inbox"). It takes deliveries under a lease, keeps the lease alive while a
 * handler runs, completes a success, retries a failure with exponential backoff (from 1 s, capped
 * at 1 h, for up to 72 h by default) and buries a delivery that exhausted them in the dead-letter
 * list. A crashed worker's deliveries are taken over when their lease (`visibilityTimeoutMs`)
 * expires. An optional `store` (an `IdempotencyStore`) guards each id as the receiver's dedupe
 * does, for engines that may hand the same delivery out twice (Cloudflare Queues).
 */
import { decodeUtf8 } from '#crypto'
import type { WebhookEvent } from '../events.js'
import type { WebhookHandler, WebhookHandlers } from '../receiver.js'
import { quietly, type IdempotencyStore } from '../stores/store.js'
import type { VerifiedDelivery } from '../verify.js'
import { DEFAULT_INBOX_RETENTION_MS, type InboxEntry, type WebhookInbox } from './inbox.js'
import { callHook } from '../visibility.js'

/** How one taken delivery ended, for logging and metrics. Never holds the body. */
export interface InboxWorkerResult {
  outcome: 'processed' | 'ignored' | 'retrying' | 'dead' | 'duplicate' | 'in_flight' | 'lease_lost'
  id: string
  endpoint: string
  eventType?: string
  /** Handler attempts made so far, this one included. */
  attempts: number
  /** The handler's error (retrying, dead). */
  error?: unknown
  /** With `retrying`: when it is due again, in milliseconds from now. */
  retryInMs?: number
  durationMs: number
}

/** Options of {@link createInboxWorker}. */
export interface InboxWorkerOptions {
  /** The inbox the receiver appends to. */
  inbox: WebhookInbox
  /** Handlers by event type, called as `handler(event, delivery)`, as in the receiver. */
  on: WebhookHandlers
  /**
   * Guards each delivery id with claim → run → complete, for inboxes that may hand a delivery out
   * twice (Cloudflare Queues deliver at least once). Not needed with RedisInbox or PostgresInbox.
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
   * handler runs, so only a crashed worker's deliveries are taken over.
   * @default 60000
   */
  visibilityTimeoutMs?: number
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
   * How long after it was accepted a delivery is still retried; then it goes to the dead letters.
   * @default 259200000 (72 h)
   */
  maxRetryAgeMs?: number
  /** Called once per taken delivery. May be sync or async; a throw or a rejection is swallowed. */
  onResult?: (result: InboxWorkerResult) => unknown
  /**
   * Called when the inbox itself fails (take, complete...): the worker waits and goes on.
   * @default a line on console.error
   */
  onError?: (error: unknown) => void
  /**
   * The clock, in milliseconds since the epoch (tests).
   * @default Date.now
   */
  now?: () => number
}

/** A running worker. */
export interface InboxWorker {
  /** Starts taking deliveries. Calling it again does nothing. */
  start(): void
  /**
   * Stops taking deliveries and waits for the handlers it is running (at most `timeoutMs`, by
   * default `visibilityTimeoutMs`); a delivery still running then is taken over by another
   * worker once its lease expires.
   */
  stop(timeoutMs?: number): Promise<void>
  /** Deliveries being processed now. */
  readonly active: number
}

const DEFAULTS = {
  concurrency: 10,
  visibilityTimeoutMs: 60_000,
  pollIntervalMs: 500,
  firstRetryDelayMs: 1_000,
  maxRetryDelayMs: 60 * 60 * 1000,
  maxRetryAgeMs: 72 * 60 * 60 * 1000,
}

function positive(value: number, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`svc-webhooks: createInboxWorker \`${name}\` must be a positive number.`)
  }
}

const yieldToEventLoop = (): Promise<void> =>
  new Promise((resolve) => ((globalThis as { setImmediate?: (f: () => void) => void }).setImmediate ?? setTimeout)(resolve))

/** The retry delay after `attempts` failures: `first * 2^(attempts - 1)`, capped. */
export function retryDelay(attempts: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(attempts - 1, 40))
}

function message(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  return text.length > 1000 ? `${text.slice(0, 1000)}...` : text
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
  const { inbox, on, store, onResult, now = Date.now } = options
  const settings = { ...DEFAULTS }
  for (const name of Object.keys(DEFAULTS) as (keyof typeof DEFAULTS)[]) {
    const value = options[name]
    if (value !== undefined) {
      positive(value, name)
      settings[name] = value
    }
  }
  if (typeof inbox?.take !== 'function') throw new TypeError('svc-webhooks: createInboxWorker needs `inbox` (MemoryInbox, RedisInbox, PostgresInbox).')
  if (typeof on !== 'object' || on === null) throw new TypeError('svc-webhooks: createInboxWorker needs `on`, the handlers by event type.')
  const handlers = on as Record<string, WebhookHandler<unknown> | undefined>
  const onError = options.onError ?? ((error: unknown) => console.error(`svc-webhooks: inbox worker: ${message(error)}`))
  let running = false
  let loop: Promise<void> | undefined
  let wake: (() => void) | undefined
  const active = new Set<Promise<void>>()

  function sleep(ms: number): Promise<void> {
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

  const report = (result: InboxWorkerResult): void => callHook(onResult, result)

  async function handle(entry: InboxEntry): Promise<void> {
    const started = now()
    const base = { id: entry.id, endpoint: entry.endpoint, attempts: entry.attempts + 1 }
    let event: WebhookEvent
    try {
      event = JSON.parse(decodeUtf8(entry.rawBody)) as WebhookEvent
    } catch (error) {
      // The body was verified and parsed when accepted: a body that no longer parses is corrupt storage.
      await inbox.bury(entry, `the stored body is not JSON: ${message(error)}`)
      return report({ ...base, outcome: 'dead', error, durationMs: now() - started })
    }
    const handler = Object.hasOwn(handlers, event.event) ? handlers[event.event] : undefined
    if (handler === undefined) {
      await inbox.complete(entry)
      return report({ ...base, outcome: 'ignored', eventType: event.event, durationMs: now() - started })
    }
    const key = entry.keys[0]!
    const owner = entry.lease
    if (store) {
      const claim = await store.claim(key, owner, settings.visibilityTimeoutMs)
      if (claim === 'completed') {
        await inbox.complete(entry)
        return report({ ...base, outcome: 'duplicate', eventType: event.event, durationMs: now() - started })
      }
      if (claim === 'in_flight') {
        await inbox.retry(entry, settings.firstRetryDelayMs, 'another worker holds this delivery')
        return report({ ...base, outcome: 'in_flight', eventType: event.event, durationMs: now() - started })
      }
    }
    const delivery: VerifiedDelivery<unknown> = {
      id: entry.id,
      timestamp: entry.timestamp,
      signatureVersion: entry.signatureVersion,
      secretIndex: entry.secretIndex,
      rawBody: entry.rawBody,
      event,
    }
    // Keep the lease while the handler runs, so no other worker takes the delivery over.
    const renew = setInterval(() => {
      inbox.extend(entry, settings.visibilityTimeoutMs).catch(() => undefined)
    }, Math.max(1, Math.floor(settings.visibilityTimeoutMs / 3)))
    let failure: unknown
    let failed = false
    try {
      await handler(event, delivery)
    } catch (error) {
      failed = true
      failure = error
    } finally {
      clearInterval(renew)
    }
    if (!failed) {
      if (store) await quietly(() => store.complete(key, owner, DEFAULT_INBOX_RETENTION_MS))
      const owned = await inbox.complete(entry)
      return report({ ...base, outcome: owned ? 'processed' : 'lease_lost', eventType: event.event, durationMs: now() - started })
    }
    if (store) await quietly(() => store.release(key, owner))
    const delay = retryDelay(base.attempts, settings.firstRetryDelayMs, settings.maxRetryDelayMs)
    if (now() + delay - entry.receivedAt > settings.maxRetryAgeMs) {
      await inbox.bury(entry, message(failure))
      return report({ ...base, outcome: 'dead', eventType: event.event, error: failure, durationMs: now() - started })
    }
    await inbox.retry(entry, delay, message(failure))
    report({ ...base, outcome: 'retrying', eventType: event.event, error: failure, retryInMs: delay, durationMs: now() - started })
  }

  async function run(): Promise<void> {
    let pause = settings.pollIntervalMs
    while (running) {
      const free = settings.concurrency - active.size
      if (free <= 0) {
        await Promise.race(active)
        continue
      }
      let entries: InboxEntry[]
      try {
        entries = await inbox.take(free, settings.visibilityTimeoutMs)
        pause = settings.pollIntervalMs
      } catch (error) {
        onError(error)
        await sleep(pause)
        pause = Math.min(pause * 2, 30_000)
        continue
      }
      for (const entry of entries) {
        const task: Promise<void> = handle(entry)
          .catch(onError)
          .finally(() => active.delete(task))
        active.add(task)
      }
      if (entries.length === 0 && running) await sleep(settings.pollIntervalMs)
      // An inbox that answers without I/O (in memory) must not starve timers and sockets.
      else await yieldToEventLoop()
    }
  }

  return {
    start() {
      if (running) return
      running = true
      loop = run()
    },
    async stop(timeoutMs = settings.visibilityTimeoutMs) {
      running = false
      wake?.()
      let timer: ReturnType<typeof setTimeout> | undefined
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))
      await Promise.race([Promise.all([loop, ...active]), timeout])
      clearTimeout(timer)
    },
    get active() {
      return active.size
    },
  }
}
