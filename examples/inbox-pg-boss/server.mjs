// Deliveries into your own pg-boss queue: `DATABASE_URL=postgres://... SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-pg-boss/server.mjs`
// The receiver answers 202 once the job row is committed (its id is made of the delivery id, so
// a resend is answered 200 duplicate), and `boss.work` in this process runs the handler through
// createPgBossHandler: retried by the queue's retryLimit with backoff, then copied to its
// dead-letter queue. The PostgresStore keeps a job pg-boss hands out again (expired while its
// worker was gone after the handler succeeded) from running the handler twice.
import { createServer } from 'node:http'
import express from 'express'
import pg from 'pg'
import { PgBoss } from 'pg-boss'
import { webhooks } from 'svc-webhooks/express'
import { PgBossInbox, createPgBossHandler } from 'svc-webhooks/pg-boss'
import { PostgresStore } from 'svc-webhooks/postgres'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-pg-boss/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)
const connectionString = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

const boss = new PgBoss(connectionString)
boss.on('error', (error) => console.error(`pg-boss: ${error.message}`))
const pool = new pg.Pool({ connectionString, max: 4 })
pool.on('error', (error) => console.error(`Postgres: ${error.message}`))
const store = new PostgresStore({ pool })
try {
  await boss.start()
  await store.ensureTable()
} catch (error) {
  console.error(`Cannot reach Postgres at DATABASE_URL: ${error.message}`)
  process.exit(1)
}
// pg-boss's defaults (2 retries, no delay) are short for webhooks: from 1 s, doubling, up to 1 h apart.
await boss.createQueue('webhooks-dead')
await boss.createQueue('webhooks', { retryLimit: 20, retryDelay: 1, retryBackoff: true, retryDelayMax: 3600, deadLetter: 'webhooks-dead' })

const handler = createPgBossHandler({
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
  store,
})

const app = express()
// The webhook route comes before express.json(): the signature covers the raw bytes.
app.post('/webhooks/svc', webhooks({ secret, inbox: new PgBossInbox({ boss, queue: 'webhooks' }) }))
app.get('/healthz', async (_req, res) => res.json(await boss.getQueue('webhooks')))
app.use(express.json())

const server = createServer(app)
server.once('error', (error) => {
  const why = error.code === 'EADDRINUSE' ? `port ${port} is already in use (set PORT to a free one)` : error.message
  console.error(`Cannot listen on 127.0.0.1:${port}: ${why}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', async () => {
  await boss.work('webhooks', { pollingIntervalSeconds: 0.5 }, handler)
  console.log(`Express receiving into a PgBossInbox on http://127.0.0.1:${port}/webhooks/svc (boss.work in this process)`)
})

// Graceful stop: take no new deliveries, let pg-boss finish the jobs it holds, then close.
let stopping = false
async function shutdown(signal) {
  if (stopping) return
  stopping = true
  console.log(`${signal}: stopping`)
  setTimeout(() => {
    console.error('Still busy 20 s after the signal: exiting anyway.')
    process.exit(1)
  }, 20_000).unref()
  const closed = new Promise((resolve) => server.close(resolve))
  server.closeIdleConnections()
  await Promise.all([closed, boss.stop({ graceful: true, timeout: 15_000 })])
  await pool.end()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
