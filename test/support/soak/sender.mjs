// @ts-check
// The sender simulator: delivers webhooks the way the service does (spec/service-api.md §6).
// Each attempt is signed afresh (new timestamp, v2 and v1 signatures, same id and stored bytes,
// §6.1-6.2); 5xx, 429 and timeouts are retried with backoff, any other 4xx is permanent and
// never retried, and an attempt gets 10 s to answer (§6.3). The backoff schedule is not shown in
// the spec: exponential with jitter, scaled down so a soak finishes in seconds.
// It also sends duplicates: copies of a delivery racing the original (concurrent resends) and
// manual resends after it was delivered. Used by the soak (harness.mjs): test/soak.test.ts and `npm run soak`.
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
 * @property {Record<string, number>} statuses answers by status
 * @property {{ p50: number, p99: number, max: number }} latencyMs per attempt
 * @property {number} elapsedMs
 */

/** @typedef {{ id: string, body: string, copy?: 'concurrent' | 'later', resend?: boolean }} Delivery */

/**
 * @param {number[]} sorted
 * @param {number} p
 */
function percentile(sorted, p) {
  if (sorted.length === 0) return 0
  return /** @type {number} */ (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))])
}

/**
 * Sends `count` deliveries to `urls` (picked at random per attempt) and reports what happened.
 *
 * @param {object} options
 * @param {string[]} options.urls receiver URLs
 * @param {string} options.secret signing secret
 * @param {number} options.count deliveries (distinct ids)
 * @param {number} [options.concurrency] deliveries in flight at once (default 32)
 * @param {number} [options.duplicateRate] share of deliveries sent twice (default 0.3)
 * @param {number} [options.concurrentShare] share of those duplicates racing the original (default 0.5)
 * @param {number} [options.timeoutMs] per attempt (default 10000, spec §6.3)
 * @param {number} [options.maxAttempts] per copy before giving up (default 30)
 * @param {number} [options.backoffMs] first retry pause; doubles per attempt (default 50)
 * @param {number} [options.maxBackoffMs] (default 2000)
 * @param {(delivered: number) => void} [options.onProgress] after each delivery's first send ends
 * @returns {Promise<{ figures: SenderFigures, ids: string[], delivered: Set<string> }>} figures, every id sent, the ids answered 2xx
 * @example
 * const figures = await simulateSender({ urls: ['http://127.0.0.1:3000/'], secret, count: 1000 })
 */
export async function simulateSender({
  urls,
  secret,
  count,
  concurrency = 32,
  duplicateRate = 0.3,
  concurrentShare = 0.5,
  timeoutMs = 10_000,
  maxAttempts = 30,
  backoffMs = 50,
  maxBackoffMs = 2000,
  onProgress,
}) {
  const started = performance.now()
  /** @type {number[]} */
  const latencies = []
  /** @type {Record<string, number>} */
  const statuses = {}
  /** @type {SenderFigures} */
  const figures = {
    deliveries: count,
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
    statuses,
    latencyMs: { p50: 0, p99: 0, max: 0 },
    elapsedMs: 0,
  }
  /** @type {Set<string>} ids with at least one 2xx answer */
  const delivered = new Set()
  let consecutiveFailures = 0

  const failure = () => {
    consecutiveFailures++
    if (consecutiveFailures > figures.maxConsecutiveFailures) figures.maxConsecutiveFailures = consecutiveFailures
  }

  /**
   * One copy of a delivery through the retry loop.
   *
   * @param {Delivery} delivery
   */
  async function send(delivery) {
    figures.copies++
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      if (attempt > 1) {
        figures.retries++
        const pause = Math.min(maxBackoffMs, backoffMs * 2 ** (attempt - 2))
        await sleep(pause * (0.5 + Math.random() / 2))
      }
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
    figures.gaveUp.push(delivery.id)
    return false
  }

  /** @type {Delivery[]} */
  const queue = []
  for (let i = 0; i < count; i++) {
    const event = sampleEvent('message.received')
    event.message.id = randomUUID()
    event.message.text = `soak message ${i}`
    const copy = Math.random() < duplicateRate ? (Math.random() < concurrentShare ? 'concurrent' : 'later') : undefined
    queue.push({ id: randomUUID(), body: serializeEvent(event), copy })
  }
  const ids = queue.map((d) => d.id)
  /** @type {Delivery[]} */
  const resends = []
  let done = 0

  async function worker() {
    for (;;) {
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
  figures.duplicatesSent = figures.concurrentResends + figures.laterResends
  latencies.sort((a, b) => a - b)
  figures.latencyMs = { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? 0) }
  figures.elapsedMs = Math.round(performance.now() - started)
  return { figures, ids, delivered }
}

/** @param {number} ms */
const round = (ms) => Math.round(ms * 10) / 10
