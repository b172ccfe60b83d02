// @ts-check
// The outage experiment, shared by test/soak/soak.test.ts and `npm run outage` (scripts/outage.mjs):
// what a downstream outage does to a receiver that runs its handler in the request, and to one
// that accepts into a durable inbox. An Express receiver set up as the README says
// (outage-app.mjs), the sender simulator delivering 20 deliveries/s for 40 s with the service's
// rules (10 s to answer, 5xx and 429 retried with backoff, other 4xx dropped, the endpoint
// disabled after 20 consecutive failures: spec/service-api.md §6.3), the handler's database
// down for 15 s of it, and every 50th delivery's handler taking 12 s.
//
// The same story runs on the job-queue engines users already run: BullMQ (mode 'bullmq', on the
// same Redis setup) and pg-boss (mode 'pg-boss', on a Postgres of its own), each with its own
// retry policy.
//
// `scale` compresses time: every duration is multiplied by it and the rate divided by it, so
// `scale: 0.25` runs the same 800 deliveries through the same story 4x faster (the sender's
// backoff and the worker's retry delays shrink alike). The sender's 10 s to answer does not
// shrink: the machine's own pauses do not compress with the story (an fsync on a disk shared
// with other work can hold redis-server's `appendfsync always` for over 2 s), so a compressed
// deadline would count them as failures five times over. Compressed, the slow handler no longer
// outlives the deadline; the handler side is disabled by the outage alone.
import { fork } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startPostgresServer } from '../postgres.mjs'
import { startRedisServer } from '../redis.mjs'
import { sendAtRate } from './sender.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const SECRET = 'svc_whsec_outage'

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** @typedef {'handler' | 'inbox' | 'bullmq' | 'pg-boss'} OutageMode */

/**
 * @typedef {object} OutageOptions
 * @property {OutageMode} mode handler in the request, or `inbox: new RedisInbox(...)` and a worker, or BullMQ's or pg-boss's queue and worker
 * @property {number} [scale] time scale (0.25: four times faster). Default 1.
 * @property {number} [rate] deliveries per second, at scale 1. Default 20.
 * @property {number} [durationS] seconds of sending, at scale 1. Default 40.
 * @property {number} [outageAtS] when the database goes down, seconds into the run. Default 10.
 * @property {number} [outageS] how long it stays down. Default 15.
 * @property {number} [slowEvery] every n-th delivery's handler is slow. Default 50.
 * @property {number} [slowS] how long that handler takes. Default 12.
 * @property {number} [workerConcurrency] the worker's `concurrency` (every mode but handler). Default 16.
 * @property {(line: string) => void} [log]
 */

/**
 * @typedef {object} OutageFigures
 * @property {OutageMode} mode
 * @property {number} scale
 * @property {number} deliveries
 * @property {number} delivered answered 2xx
 * @property {number} neverDelivered never answered 2xx (dropped, or not sent once disabled)
 * @property {number} maxConsecutiveFailures the most the sender saw in a row
 * @property {number} failedAfterDisabled of those, attempts already in flight when the endpoint was disabled
 * @property {boolean} disabled
 * @property {number | undefined} disabledAtS when, in seconds at scale 1
 * @property {number} notSent deliveries never attempted because the endpoint was disabled
 * @property {number} attempts
 * @property {number} timeouts
 * @property {{ p50: number, p99: number, max: number }} latencyMs the sender's wait per attempt
 * @property {Record<string, number>} statuses
 * @property {number} processed deliveries whose handler succeeded
 * @property {number} lost deliveries whose handler never succeeded
 * @property {number} runTwice deliveries whose handler succeeded more than once
 * @property {number} handlerRuns invocations
 * @property {number} handlerFailures invocations that threw (the database was down)
 * @property {boolean} drained every handler had finished (and, with the inbox, the inbox was empty) in time
 * @property {number} drainS seconds after the last send until then, at scale 1
 * @property {Record<string, number>} answers the receiver's outcomes
 * @property {Record<string, number>} workerOutcomes the worker's outcomes (every mode but handler)
 * @property {number} elapsedMs wall time of the run
 */

/**
 * The receiver process, forked with IPC.
 *
 * @param {Record<string, string>} env
 */
function startApp(env) {
  const child = fork(join(here, 'outage-app.mjs'), [], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
  let err = ''
  child.stderr?.on('data', (d) => (err = (err + d).slice(-4000)))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  /** @type {((message: any) => void)[]} */
  const waiting = []
  child.on('message', (message) => waiting.shift()?.(message))
  /**
   * Sends `message` and resolves with the next reply (bounded by `timeoutMs`).
   *
   * @param {object} message
   * @param {number} [timeoutMs]
   * @returns {Promise<any>}
   */
  const ask = (message, timeoutMs = 15_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the outage receiver did not answer ${JSON.stringify(message)}: ${err.slice(-500)}`)), timeoutMs)
      waiting.push((reply) => {
        clearTimeout(timer)
        resolve(reply)
      })
      if (Object.keys(message).length > 0) child.send(message)
    })
  return {
    /** @type {Promise<number>} */
    ready: ask({}, 30_000).then((/** @type {{ ready: number }} */ m) => m.ready),
    /** @param {object} message */
    tell: (message) => child.send(message),
    ask,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL')
        await exited
      }
    },
  }
}

/**
 * Runs one side of the experiment.
 *
 * @param {OutageOptions} options
 * @returns {Promise<OutageFigures>}
 * @example
 * const withInbox = await runOutage({ mode: 'inbox', scale: 0.25 })
 */
export async function runOutage({ mode, scale = 1, rate = 20, durationS = 40, outageAtS = 10, outageS = 15, slowEvery = 50, slowS = 12, workerConcurrency = 16, log = () => {} }) {
  if (!(scale > 0)) throw new TypeError('scale must be a positive number')
  const started = Date.now()
  const ms = (/** @type {number} */ seconds) => Math.round(seconds * 1000 * scale)
  const redis = mode === 'inbox' || mode === 'bullmq' ? await startRedisServer({ persist: true }) : undefined
  const postgres = mode === 'pg-boss' ? await startPostgresServer({ fsync: true, maxConnections: 200 }) : undefined
  const app = startApp({
    OUTAGE_MODE: mode,
    OUTAGE_SECRET: SECRET,
    OUTAGE_REDIS_URL: redis?.url ?? '',
    OUTAGE_POSTGRES_URL: postgres?.url ?? '',
    OUTAGE_SLOW_EVERY: String(slowEvery),
    OUTAGE_SLOW_MS: String(ms(slowS)),
    // The worker's defaults, on the same time scale: retries from 1 s, a 60 s lease, polls every 0.5 s.
    OUTAGE_FIRST_RETRY_MS: String(ms(1)),
    OUTAGE_VISIBILITY_MS: String(ms(60)),
    OUTAGE_POLL_MS: String(ms(0.5)),
    OUTAGE_WORKER_CONCURRENCY: String(workerConcurrency),
  })
  /** @type {ReturnType<typeof setTimeout>[]} */
  const timers = []
  try {
    const port = await app.ready
    const count = Math.round(rate * durationS)
    log(`outage (${mode}): ${count} deliveries at ${rate}/s, database down from ${outageAtS} s for ${outageS} s, every ${slowEvery}th handler ${slowS} s (time x${scale})`)
    timers.push(setTimeout(() => app.tell({ database: 'down' }), ms(outageAtS)))
    timers.push(setTimeout(() => app.tell({ database: 'up' }), ms(outageAtS + outageS)))
    const { figures, ids, delivered } = await sendAtRate({
      urls: [`http://127.0.0.1:${port}/webhooks/svc`],
      secret: SECRET,
      count,
      rate: rate / scale,
      // No timeoutMs: the sender's own default, the service's 10 s, at every scale (above).
      // The service's schedule is not published: from 1 s, doubling, at most 30 s apart.
      backoffMs: ms(1),
      maxBackoffMs: ms(30),
      maxAttempts: 10,
      disableAfter: 20,
    })
    // Every handler finished (a slow one may outlive its request), and with the inbox, the inbox empty.
    const sentAt = Date.now()
    const drainLimit = Math.max(5000, ms(slowS + 60))
    let drained = false
    for (let i = 0; i < 10_000 && Date.now() - sentAt < drainLimit; i++) {
      const { status } = await app.ask({ status: true })
      if (status.active === 0 && (status.inbox === undefined || status.inbox.depth === 0)) {
        drained = true
        break
      }
      await sleep(Math.max(20, ms(0.25)))
    }
    const drainS = (Date.now() - sentAt) / 1000 / scale
    const { figures: app_ } = await app.ask({ stop: true })
    /** @type {Map<string, number>} */
    const runs = new Map(app_.runs)
    const result = {
      mode,
      scale,
      deliveries: count,
      delivered: delivered.size,
      neverDelivered: count - delivered.size,
      maxConsecutiveFailures: figures.maxConsecutiveFailures,
      failedAfterDisabled: figures.failedAfterDisabled,
      disabled: figures.disabled,
      disabledAtS: figures.disabledAtMs === undefined ? undefined : figures.disabledAtMs / 1000 / scale,
      notSent: figures.notSent,
      attempts: figures.attempts,
      timeouts: figures.timeouts,
      latencyMs: figures.latencyMs,
      statuses: figures.statuses,
      processed: ids.filter((id) => runs.has(id)).length,
      lost: ids.filter((id) => !runs.has(id)).length,
      runTwice: ids.filter((id) => (runs.get(id) ?? 0) > 1).length,
      handlerRuns: app_.invocations,
      handlerFailures: app_.failures,
      drained,
      drainS: Math.round(drainS * 10) / 10,
      answers: app_.answers,
      workerOutcomes: app_.workerOutcomes,
      elapsedMs: Date.now() - started,
    }
    log(`outage (${mode}): ${JSON.stringify(result)}`)
    return result
  } finally {
    for (const timer of timers) clearTimeout(timer)
    await app.kill()
    await redis?.stop()
    await postgres?.stop()
  }
}

/**
 * Both sides, one after the other: (a) the handler in the request, (b) the inbox and a worker.
 *
 * @param {Omit<OutageOptions, 'mode'>} [options]
 * @returns {Promise<{ handler: OutageFigures, inbox: OutageFigures }>}
 * @example
 * const { handler, inbox } = await runOutageComparison({ scale: 0.25 })
 */
export async function runOutageComparison(options = {}) {
  const handler = await runOutage({ ...options, mode: 'handler' })
  const inbox = await runOutage({ ...options, mode: 'inbox' })
  return { handler, inbox }
}

/**
 * What the inbox side must show: empty for a pass.
 *
 * @param {OutageFigures} inbox
 * @returns {string[]}
 * @example
 * const problems = outageProblems((await runOutageComparison()).inbox)
 */
export function outageProblems(inbox) {
  const problems = []
  if (inbox.lost) problems.push(`${inbox.lost} lost`)
  if (inbox.runTwice) problems.push(`${inbox.runTwice} run twice`)
  if (inbox.maxConsecutiveFailures >= 20) problems.push(`the sender saw ${inbox.maxConsecutiveFailures} consecutive failures`)
  if (inbox.disabled) problems.push('the endpoint was disabled')
  if (!inbox.drained) problems.push('the inbox did not drain in time')
  return problems
}
