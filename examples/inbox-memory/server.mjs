// Durable-inbox flow, in memory: `SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-memory/server.mjs`
// The receiver answers 202 once a verified delivery is in the inbox; a worker in this same
// process runs the handler afterwards, retrying failures with backoff. MemoryInbox is NOT
// durable: a restart loses every delivery answered 202 and not yet processed. It shows the flow;
// run examples/inbox-redis or examples/inbox-postgres in production.
import { createServer } from 'node:http'
import express from 'express'
import { MemoryInbox, createInboxWorker } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-memory/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const inbox = new MemoryInbox()
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
  console.log(`Express receiving into a MemoryInbox on http://127.0.0.1:${port}/webhooks/svc`)
})

// Graceful stop: take no new deliveries, let the worker finish what it holds, then exit.
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
  await Promise.all([closed, worker.stop(15_000)])
  const { depth } = await inbox.stats()
  if (depth > 0) console.error(`${depth} accepted deliveries were not processed and are lost: MemoryInbox is not durable.`)
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
