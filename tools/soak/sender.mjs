// @ts-check
// The sender simulator: delivers webhooks the way the service does (spec/service-api.md §6).
// Each attempt is signed afresh (new timestamp, v2 and v1 signatures, same id and stored bytes,
// §6.1-6.2); 5xx, 429 and timeouts are retried with backoff, any other 4xx is permanent and
// never retried, an attempt gets 10 s to answer, and with `disableAfter: 20` the endpoint is
// disabled after 20 consecutive failures: nothing is attempted after that (§6.3). The backoff
// schedule is not shown in the spec: exponential with jitter, scaled down so a soak finishes in
// seconds.
// Two ways to send: `simulateSender` keeps `concurrency` deliveries in flight as fast as the
// receivers answer, with duplicates (copies racing the original, manual resends after it was
// delivered); `sendAtRate` starts one new delivery every 1/rate s, each with its own retry loop,
// as a steady stream of events would. Used by the soaks (harness.mjs, inbox-soak.mjs) and the
// outage experiment (outage.mjs).
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { sampleEvent, serializeEvent, signWebhook } from 'svc-webhooks/testing'

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * What the sender saw.
 *
 * @typedef {object} SenderFigures
 * @property {number} deliveries distinct ids sent
 * @property {number} duplicatesSent concurrentResends + laterResends
 * @property {number} concurrentResends deliveries sent twice at once
 * @property {number} laterResends deliveries sent again after they were delivered
 * @property {number} copies copies put through the retry loop
 * @property {number} attempts HTTP requests
 * @property {number} retries
 * @property {number} timeouts
 * @property {number} networkErrors
 * @property {{ id: string, status: number }[]} permanent a 4xx other than 429: the service drops the delivery
 * @property {string[]} gaveUp ids whose attempts ran out
 * @property {number} maxConsecutiveFailures
 * @property {boolean} disabled the endpoint was disabled (`disableAfter` consecutive failures)
 * @property {number | undefined} disabledAtMs when, from the start of the run
 * @property {number} failedAfterDisabled attempts already in flight when it was disabled that failed too
 * @property {number} notSent deliveries never attempted because the endpoint was disabled
 * @property {Record<string, number>} statuses answers by status
 * @property {{ p50: number, p99: number, max: number }} latencyMs per attempt
 * @property {number} elapsedMs
 */

/** @typedef {{ id: string, index: number, body: string, copy?: 'concurrent' | 'later', resend?: boolean }} Delivery */

/**
 * Retry rules shared by both ways to send.
 *
 * @typedef {object} SenderRules
 * @property {string[]} urls receiver URLs (one picked at random per attempt)
 * @property {string} secret signing secret
 * @property {number} [timeoutMs] per attempt (default 10000, spec §6.3 rule 1)
 * @property {number} [maxAttempts] per copy before giving up (default 30)
 * @property {number} [backoffMs] first retry pause; doubles per attempt (default 50)
 * @property {number} [maxBackoffMs] (default 2000)
 * @property {number} [disableAfter] consecutive failures that disable the endpoint (spec §6.3 rule 4: 20); default never
 */

/**
 * @param {number[]} sorted
 * @param {number} p
 */
function percentile(sorted, p) {
  if (sorted.length === 0) return 0
  return /** @type {number} */ (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))])
}

/** @param {number} ms */
const round = (ms) => Math.round(ms * 10) / 10

/**
 * A `message.received` delivery with a fresh id; its text ends with its index, which the soak
 * and outage handlers read (`message 49`).
 *
 * @param {number} index
 * @returns {Delivery}
 */
export function makeDelivery(index) {
  const event = sampleEvent('message.received')
  event.message.id = randomUUID()
  event.message.text = `soak message ${index}`
  return { id: randomUUID(), index, body: serializeEvent(event) }
}

/**
 * The index a delivery made by {@link makeDelivery} carries in its text.
 *
 * @param {{ message: { text: string } }} event
 * @returns {number}
 */
export function deliveryIndex(event) {
  return Number(/message (\d+)$/.exec(event.message.text)?.[1] ?? -1)
}

/**
 * The retry loop of one copy of a delivery, with the figures every way to send shares.
 *
 * @param {SenderRules} rules
 */
function createSender({ urls, secret, timeoutMs = 10_000, maxAttempts = 30, backoffMs = 50, maxBackoffMs = 2000, disableAfter = Infinity }) {
  const started = performance.now()
  /** @type {number[]} */
  const latencies = []
  /** @type {Record<string, number>} */
  const statuses = {}
  /** @type {SenderFigures} */
  const figures = {
    deliveries: 0,
    duplicatesSent: 0,
    concurrentResends: 0,
    laterResends: 0,
    copies: 0,
    attempts: 0,
    retries: 0,
    timeouts: 0,
    networkErrors: 0,
    permanent: [],
    gaveUp: [],
    maxConsecutiveFailures: 0,
    disabled: false,
    disabledAtMs: undefined,
    failedAfterDisabled: 0,
    notSent: 0,
    statuses,
    latencyMs: { p50: 0, p99: 0, max: 0 },
    elapsedMs: 0,
  }
  let consecutiveFailures = 0

  const failure = () => {
    if (figures.disabled) figures.failedAfterDisabled++
    consecutiveFailures++
    if (consecutiveFailures > figures.maxConsecutiveFailures) figures.maxConsecutiveFailures = consecutiveFailures
    if (consecutiveFailures >= disableAfter && !figures.disabled) {
      // §6.3 rule 4: disabled until a person re-enables it. Nothing more is attempted.
      figures.disabled = true
      figures.disabledAtMs = Math.round(performance.now() - started)
    }
  }

  /**
   * One copy of a delivery through the retry loop: true once answered 2xx.
   *
   * @param {Delivery} delivery
   * @returns {Promise<boolean>}
   */
  async function send(delivery) {
    figures.copies++
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (attempt > 1) {
        figures.retries++
        const pause = Math.min(maxBackoffMs, backoffMs * 2 ** (attempt - 2))
        await sleep(pause * (0.5 + Math.random() / 2))
      }
      if (figures.disabled) return false
      // Fresh timestamp and signatures on every attempt, over the same stored bytes (§6.2).
      const signed = await signWebhook({ secret, body: delivery.body, id: delivery.id })
      const url = /** @type {string} */ (urls[Math.floor(Math.random() * urls.length)])
      figures.attempts++
      const t0 = performance.now()
      let status
      try {
        const res = await fetch(url, { method: 'POST', headers: signed.headers, body: /** @type {BodyInit} */ (signed.rawBody), signal: AbortSignal.timeout(timeoutMs) })
        await res.arrayBuffer()
        status = res.status
      } catch (error) {
        latencies.push(performance.now() - t0)
        if (/** @type {Error | undefined} */ (error)?.name === 'TimeoutError') figures.timeouts++
        else figures.networkErrors++
        failure()
        continue
      }
      latencies.push(performance.now() - t0)
      statuses[status] = (statuses[status] ?? 0) + 1
      if (status >= 200 && status < 300) {
        consecutiveFailures = 0
        return true
      }
      failure()
      if (status >= 500 || status === 429) continue
      // Any other 4xx is permanent (§6.3 rule 3): the service drops the delivery.
      figures.permanent.push({ id: delivery.id, status })
      return false
    }
    if (!figures.disabled) figures.gaveUp.push(delivery.id)
    return false
  }

  function finish() {
    figures.duplicatesSent = figures.concurrentResends + figures.laterResends
    latencies.sort((a, b) => a - b)
    figures.latencyMs = { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? 0) }
    figures.elapsedMs = Math.round(performance.now() - started)
    return figures
  }

  return { figures, send, finish }
}

/**
 * Sends `count` deliveries to `urls` (picked at random per attempt), `concurrency` at a time,
 * with duplicates, and reports what happened.
 *
 * @param {SenderRules & {
 *   count: number,
 *   concurrency?: number,
 *   duplicateRate?: number,
 *   concurrentShare?: number,
 *   onProgress?: (delivered: number) => void,
 * }} options `concurrency` deliveries in flight at once (default 32); `duplicateRate` share of
 *   deliveries sent twice (default 0.3); `concurrentShare` share of those racing the original
 *   (default 0.5); `onProgress` after each delivery's first send ends
 * @returns {Promise<{ figures: SenderFigures, ids: string[], delivered: Set<string> }>} figures, every id made, the ids answered 2xx
 * @example
 * const { figures } = await simulateSender({ urls: ['http://127.0.0.1:3000/'], secret, count: 1000 })
 */
export async function simulateSender({ count, concurrency = 32, duplicateRate = 0.3, concurrentShare = 0.5, onProgress, ...rules }) {
  const { figures, send, finish } = createSender(rules)
  figures.deliveries = count
  /** @type {Set<string>} ids with at least one 2xx answer */
  const delivered = new Set()

  /** @type {Delivery[]} */
  const queue = []
  for (let i = 0; i < count; i++) {
    const delivery = makeDelivery(i)
    delivery.copy = Math.random() < duplicateRate ? (Math.random() < concurrentShare ? 'concurrent' : 'later') : undefined
    queue.push(delivery)
  }
  const ids = queue.map((d) => d.id)
  /** @type {Delivery[]} */
  const resends = []
  let done = 0

  async function worker() {
    // Bounded: each turn removes one delivery from `queue` or `resends`, and only a delivery
    // from `queue` adds (at most one) resend.
    for (;;) {
      if (figures.disabled) return
      // Manual resends go out mixed with new deliveries, not all at the end.
      const delivery = (resends.length > 0 && Math.random() < 0.5 ? resends.shift() : queue.shift()) ?? resends.shift()
      if (delivery === undefined) return
      if (delivery.resend) {
        await send(delivery)
        continue
      }
      const copies = delivery.copy === 'concurrent' ? 2 : 1
      if (delivery.copy === 'concurrent') figures.concurrentResends++
      const results = await Promise.all(Array.from({ length: copies }, () => send(delivery)))
      if (results.some(Boolean)) delivered.add(delivery.id)
      if (delivery.copy === 'later') {
        figures.laterResends++
        resends.push({ ...delivery, resend: true })
      }
      done++
      onProgress?.(done)
    }
  }

  await Promise.all(Array.from({ length: concurrency }, worker))
  figures.notSent = queue.length
  return { figures: finish(), ids, delivered }
}

/**
 * Starts `count` deliveries, one every `1000 / rate` ms, each with its own retry loop (no cap on
 * deliveries in flight, as a service emitting a steady stream of events), and waits for all of
 * them to be delivered, dropped or stopped by the endpoint being disabled.
 *
 * @param {SenderRules & { count: number, rate: number, onSchedule?: (index: number) => void, deliveries?: Delivery[], make?: (index: number) => Delivery }} options
 *   `rate` deliveries per second; `onSchedule` as each delivery is started; `deliveries` to send
 *   these again (a resend of each, same id and bytes) instead of `count` fresh ones; `make` to
 *   make each fresh one (default {@link makeDelivery})
 * @returns {Promise<{ figures: SenderFigures, ids: string[], delivered: Set<string>, deliveries: Delivery[] }>}
 * @example
 * const { figures } = await sendAtRate({ urls: ['http://127.0.0.1:3000/webhooks/svc'], secret, count: 800, rate: 20, disableAfter: 20 })
 */
export async function sendAtRate({ count, rate, onSchedule, deliveries: given, make = makeDelivery, ...rules }) {
  const { figures, send, finish } = createSender(rules)
  if (given) count = given.length
  figures.deliveries = count
  /** @type {Delivery[]} */
  const deliveries = []
  const start = performance.now()
  /** @type {Set<string>} */
  const delivered = new Set()
  /** @type {string[]} */
  const ids = []
  /** @type {Promise<void>[]} */
  const inFlight = []
  for (let i = 0; i < count; i++) {
    // Scheduled against the start, so a slow turn of the event loop does not stretch the run.
    const wait = start + (i * 1000) / rate - performance.now()
    if (wait > 0) await sleep(wait)
    const delivery = given?.[i] ?? make(i)
    ids.push(delivery.id)
    deliveries.push(delivery)
    if (figures.disabled) {
      figures.notSent++
      continue
    }
    onSchedule?.(i)
    inFlight.push(
      send(delivery).then((ok) => {
        if (ok) delivered.add(delivery.id)
      }),
    )
  }
  await Promise.all(inFlight)
  return { figures: finish(), ids, delivered, deliveries }
}

/**
 * Sends every one of `deliveries` again (same id, same bytes, fresh signatures), `concurrency` at
 * a time, through the same retry rules: a user's resend of everything, or the sender's later
 * retry, after a fault. Every delivery answered 2xx before must be answered 200 duplicate now,
 * its handler not run again.
 *
 * @param {SenderRules & { deliveries: Delivery[], concurrency?: number }} options
 * @returns {Promise<{ figures: SenderFigures, delivered: Set<string> }>}
 * @example
 * const again = await resendAll({ urls, secret, deliveries: first.deliveries })
 */
export async function resendAll({ deliveries, concurrency = 16, ...rules }) {
  const { figures, send, finish } = createSender(rules)
  figures.deliveries = deliveries.length
  figures.laterResends = deliveries.length
  /** @type {Set<string>} */
  const delivered = new Set()
  const queue = [...deliveries]
  async function worker() {
    // Bounded: each turn takes one delivery off the queue.
    for (let delivery = queue.shift(); delivery !== undefined; delivery = queue.shift()) {
      if (await send(delivery)) delivered.add(delivery.id)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return { figures: finish(), delivered }
}
