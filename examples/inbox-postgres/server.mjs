// Durable inbox on Postgres: `DATABASE_URL=postgres://user:pass@127.0.0.1:5432/app SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-postgres/server.mjs`
// The receiver answers 202 once the delivery is committed in Postgres, so a slow or failing
// handler never makes the sender retry or disable the endpoint; a worker in this process runs
// the handlers afterwards (start more processes like this one, or workers alone, as the load
// needs: each delivery is leased to one worker at a time).
import { createServer } from 'node:http'
import express from 'express'
import pg from 'pg'
import { createInboxWorker } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { PostgresInbox } from 'svc-webhooks/postgres'

const secret = process.env.SVC_WEBHOOK_SECRET
const databaseUrl = process.env.DATABASE_URL
if (!secret || !databaseUrl) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...) and DATABASE_URL to your Postgres, e.g.\n  DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-postgres/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const pool = new pg.Pool({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 })
pool.on('error', (error) => console.error(`Postgres: ${error.message}`)) // an idle connection dropped; the pool opens another
const inbox = new PostgresInbox({ pool })
try {
  await inbox.ensureTable() // or run createInboxTableSql() from your migrations
} catch (error) {
  console.error(`Cannot create the inbox tables in DATABASE_URL: ${error.message}`)
  process.exit(1)
}
// Processed ids are remembered for 72 h (a resend is a duplicate); the inbox deletes them after
// that on its own (an unref'd timer, one process at a time): no sweep() to schedule.

const worker = createInboxWorker({
  inbox,
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
  // A handler failure (the first, then every fifth attempt), a dead letter or an unreachable
  // inbox leaves a line in the log by default. A handler still running after
  // handlerTimeoutMs (default 5 min) has its delivery.signal aborted and is retried.
  handlerTimeoutMs: 60_000,
})

const app = express()
// The webhook route comes before express.json(): the signature covers the raw bytes.
app.post('/webhooks/svc', webhooks({ secret, inbox }))
// Depth, oldest age, retrying, dead: what a health check or an alert reads.
app.get('/healthz', async (_req, res) => res.json(await inbox.stats()))
app.use(express.json())

const server = createServer(app)
server.once('error', (error) => {
  const why = error.code === 'EADDRINUSE' ? `port ${port} is already in use (set PORT to a free one)` : error.message
  console.error(`Cannot listen on 127.0.0.1:${port}: ${why}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => {
  worker.start()
  console.log(`Express receiving into a PostgresInbox on http://127.0.0.1:${port}/webhooks/svc`)
})

// Graceful stop: take no new deliveries, let the worker finish what it holds (anything it could
// not finish goes to another worker once its lease expires), then close the pool and exit.
let stopping = false
async function shutdown(signal) {
  if (stopping) return
  stopping = true
  console.log(`${signal}: stopping`)
  setTimeout(() => {
    console.error('Still busy 20 s after the signal: exiting anyway.')
    process.exit(1)
  }, 20_000).unref()
  inbox.close()
  const closed = new Promise((resolve) => server.close(resolve))
  server.closeIdleConnections()
  await Promise.all([closed, worker.stop(15_000)])
  await pool.end()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
