// The outage experiment's receiver (outage.mjs), set up as the README says: Express with
// `webhooks()` from svc-webhooks/express, mounted before express.json(). Run by `fork`, driven over
// IPC. Two modes (OUTAGE_MODE):
// - 'handler': `webhooks({ secret, on })`, the handler runs in the request (the default
//   MemoryStore dedupes), so a failing handler is a 500 to the sender;
// - 'inbox': `webhooks({ secret, inbox: new RedisInbox(...) })` and createInboxWorker in this
//   same process running the handler;
// - 'bullmq': `inbox: new BullMQInbox({ queue })` and a BullMQ Worker running
//   createBullMQProcessor, retries by the jobs' attempts and exponential backoff;
// - 'pg-boss': `inbox: new PgBossInbox({ boss, queue })` and `boss.work` running
//   createPgBossHandler, retries by the queue's retryLimit with retryBackoff.
// The handler stands for "save the message to the database": it throws while the parent says the
// database is down ({ database: 'down' | 'up' }), takes OUTAGE_SLOW_MS on every OUTAGE_SLOW_EVERY-th
// delivery, and counts its successful runs per delivery id (no process dies here, so a count in
// memory is the whole truth).
// Env: OUTAGE_MODE, OUTAGE_SECRET, OUTAGE_REDIS_URL, OUTAGE_POSTGRES_URL, OUTAGE_SLOW_EVERY, OUTAGE_SLOW_MS,
// OUTAGE_FIRST_RETRY_MS, OUTAGE_VISIBILITY_MS, OUTAGE_POLL_MS, OUTAGE_WORKER_CONCURRENCY.
// IPC: sends { ready: port }; answers { status } with { active, inbox }; { stop } with the figures.
import express from 'express'
import { createInboxWorker } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { RedisInbox } from 'svc-webhooks/redis'
import { deliveryIndex } from './sender.mjs'

const env = process.env
const mode = env.OUTAGE_MODE ?? 'handler'
const slowEvery = Number(env.OUTAGE_SLOW_EVERY ?? '50')
const slowMs = Number(env.OUTAGE_SLOW_MS ?? '12000')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let databaseUp = true
/** Successful runs by delivery id. */
const runs = new Map()
let invocations = 0
let failures = 0
let active = 0

/** The user's handler: "save the message". */
async function saveMessage(event, delivery) {
  invocations++
  active++
  try {
    if (deliveryIndex(event) % slowEvery === slowEvery - 1) await sleep(slowMs)
    if (!databaseUp) {
      failures++
      throw new Error('database unavailable')
    }
    runs.set(delivery.id, (runs.get(delivery.id) ?? 0) + 1)
  } finally {
    active--
  }
}

const answers = {}
const onResult = (result) => void (answers[result.outcome] = (answers[result.outcome] ?? 0) + 1)
const workerOutcomes = {}
let inbox
let redis
let worker
/** Deliveries accepted and not yet completed or dead (the engines' inboxes have no stats()). */
let depth = async () => (await inbox?.stats().catch(() => undefined))?.depth
/** Stops the engine's worker and connections. */
let close = async () => {
  await worker?.stop(5000)
  redis?.disconnect()
}
const retry = { firstMs: Number(env.OUTAGE_FIRST_RETRY_MS ?? '1000'), concurrency: Number(env.OUTAGE_WORKER_CONCURRENCY ?? '16') }
const workerResult = (result) => void (workerOutcomes[result.outcome] = (workerOutcomes[result.outcome] ?? 0) + 1)

const app = express()
if (mode === 'inbox') {
  const { Redis } = await import('ioredis')
  redis = new Redis(env.OUTAGE_REDIS_URL)
  redis.on('error', () => {})
  inbox = new RedisInbox({ client: redis })
  app.post('/webhooks/svc', webhooks({ secret: env.OUTAGE_SECRET, inbox, onResult }))
  worker = createInboxWorker({
    inbox,
    on: { 'message.received': saveMessage },
    concurrency: Number(env.OUTAGE_WORKER_CONCURRENCY ?? '16'),
    firstRetryDelayMs: Number(env.OUTAGE_FIRST_RETRY_MS ?? '1000'),
    visibilityTimeoutMs: Number(env.OUTAGE_VISIBILITY_MS ?? '60000'),
    pollIntervalMs: Number(env.OUTAGE_POLL_MS ?? '500'),
    onResult: workerResult,
  })
  worker.start()
} else if (mode === 'bullmq') {
  const { Queue, Worker } = await import('bullmq')
  const { BullMQInbox, createBullMQProcessor } = await import('svc-webhooks/bullmq')
  const connection = { url: env.OUTAGE_REDIS_URL }
  const queue = new Queue('webhooks', { connection })
  queue.on('error', () => {})
  // The inbox worker's retry story on BullMQ's terms: exponential from OUTAGE_FIRST_RETRY_MS.
  inbox = new BullMQInbox({ queue, jobOptions: { attempts: 18, backoff: { type: 'exponential', delay: retry.firstMs } } })
  app.post('/webhooks/svc', webhooks({ secret: env.OUTAGE_SECRET, inbox, onResult }))
  const bullWorker = new Worker('webhooks', createBullMQProcessor({ on: { 'message.received': saveMessage }, onResult: workerResult }), { connection, concurrency: retry.concurrency })
  bullWorker.on('error', () => {})
  depth = async () => {
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'paused')
    return Object.values(counts).reduce((sum, n) => sum + n, 0)
  }
  close = async () => {
    await bullWorker.close()
    await queue.close()
  }
} else if (mode === 'pg-boss') {
  const { PgBoss } = await import('pg-boss')
  const { PgBossInbox, createPgBossHandler } = await import('svc-webhooks/pg-boss')
  const boss = new PgBoss({ connectionString: env.OUTAGE_POSTGRES_URL, max: 20 })
  boss.on('error', () => {})
  await boss.start()
  // pg-boss counts retry delays in whole seconds: the scaled first delay, at least 1 s, doubling.
  const seconds = Math.max(1, Math.round(retry.firstMs / 1000))
  await boss.createQueue('webhooks-dead')
  await boss.createQueue('webhooks', { retryLimit: 20, retryDelay: seconds, retryBackoff: true, retryDelayMax: 30 * seconds, deadLetter: 'webhooks-dead' })
  inbox = new PgBossInbox({ boss, queue: 'webhooks' })
  app.post('/webhooks/svc', webhooks({ secret: env.OUTAGE_SECRET, inbox, onResult }))
  // A pg-boss worker waits its polling interval (at least 0.5 s) after every fetch: batches, and
  // fetching again at once while they come back full, keep up with the time-compressed rates;
  // per-job results let one failure in a batch retry that job alone.
  const handler = createPgBossHandler({ on: { 'message.received': saveMessage }, onResult: workerResult, perJobResults: true })
  await boss.work('webhooks', { pollingIntervalSeconds: 0.5, localConcurrency: retry.concurrency, batchSize: 8, burstWhenBatchFull: true, perJobResults: true }, handler)
  depth = async () => {
    const { rows } = await boss.getDb().executeSql("SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'webhooks' AND state IN ('created', 'retry', 'active')")
    return rows[0].n
  }
  close = () => boss.stop({ graceful: true, timeout: 5000 })
} else {
  app.post('/webhooks/svc', webhooks({ secret: env.OUTAGE_SECRET, on: { 'message.received': saveMessage }, onResult }))
}
app.use(express.json())

const server = app.listen(0, '127.0.0.1', () => process.send({ ready: server.address().port }))

process.on('message', async (message) => {
  if (message.database) databaseUp = message.database === 'up'
  if (message.status) {
    const waiting = await depth().catch(() => undefined)
    process.send({ status: { active, inbox: waiting === undefined ? undefined : { depth: waiting } } })
  }
  if (message.stop) {
    await close().catch(() => undefined)
    server.close()
    server.closeAllConnections()
    process.send({ figures: { runs: [...runs], invocations, failures, answers, workerOutcomes } }, () => process.exit(0))
  }
})
