// The outage experiment's receiver (outage.mjs), set up as the README says: Express with
// `webhooks()` from svc-webhooks/express, mounted before express.json(). Run by `fork`, driven over
// IPC. Two modes (OUTAGE_MODE):
// - 'handler': `webhooks({ secret, on })`, the handler runs in the request (the default
//   MemoryStore dedupes), so a failing handler is a 500 to the sender;
// - 'inbox': `webhooks({ secret, inbox: new RedisInbox(...) })` and createInboxWorker in this
//   same process running the handler.
// The handler stands for "save the message to the database": it throws while the parent says the
// database is down ({ database: 'down' | 'up' }), takes OUTAGE_SLOW_MS on every OUTAGE_SLOW_EVERY-th
// delivery, and counts its successful runs per delivery id (no process dies here, so a count in
// memory is the whole truth).
// Env: OUTAGE_MODE, OUTAGE_SECRET, OUTAGE_REDIS_URL, OUTAGE_SLOW_EVERY, OUTAGE_SLOW_MS,
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
    onResult: (result) => void (workerOutcomes[result.outcome] = (workerOutcomes[result.outcome] ?? 0) + 1),
  })
  worker.start()
} else {
  app.post('/webhooks/svc', webhooks({ secret: env.OUTAGE_SECRET, on: { 'message.received': saveMessage }, onResult }))
}
app.use(express.json())

const server = app.listen(0, '127.0.0.1', () => process.send({ ready: server.address().port }))

process.on('message', async (message) => {
  if (message.database) databaseUp = message.database === 'up'
  if (message.status) process.send({ status: { active, inbox: await inbox?.stats().catch(() => undefined) } })
  if (message.stop) {
    await worker?.stop(5000)
    server.close()
    server.closeAllConnections()
    redis?.disconnect()
    process.send({ figures: { runs: [...runs], invocations, failures, answers, workerOutcomes } }, () => process.exit(0))
  }
})
