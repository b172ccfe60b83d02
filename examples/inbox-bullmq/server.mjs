// Deliveries into your own BullMQ queue: `REDIS_URL=redis://127.0.0.1:6379 SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-bullmq/server.mjs`
// The receiver answers 202 once Redis stored the job (the delivery id is the job id, so a resend
// is answered 200 duplicate), and a BullMQ Worker in this process runs the handler through
// createBullMQProcessor: retried by the job's attempts and backoff, then left in the failed set.
// The RedisStore keeps a job BullMQ hands out again (a worker killed after the handler succeeded)
// from running the handler twice. Your dashboards (Bull Board, Taskforce) see the queue as usual.
import { createServer } from 'node:http'
import { Queue, Worker } from 'bullmq'
import express from 'express'
import { Redis } from 'ioredis'
import { BullMQInbox, createBullMQProcessor } from 'svc-webhooks/bullmq'
import { webhooks } from 'svc-webhooks/express'
import { RedisStore } from 'svc-webhooks/redis'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-bullmq/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

const client = new Redis(url, { lazyConnect: true })
client.on('error', (error) => console.error(`Redis: ${error.message}`)) // ioredis reconnects by itself
try {
  await client.connect()
} catch (error) {
  console.error(`Cannot reach Redis at REDIS_URL: ${error.message}`)
  process.exit(1)
}
const queue = new Queue('webhooks', { connection: { url } })
queue.on('error', (error) => console.error(`BullMQ: ${error.message}`))

const worker = new Worker(
  'webhooks',
  createBullMQProcessor({
    on: {
      'message.received': async (event, delivery) => {
        console.log(`processed ${event.event} ${delivery.id}`)
      },
    },
    store: new RedisStore({ client }),
  }),
  { connection: { url }, autorun: false },
)
worker.on('error', (error) => console.error(`BullMQ worker: ${error.message}`))

const app = express()
// The webhook route comes before express.json(): the signature covers the raw bytes.
app.post('/webhooks/svc', webhooks({ secret, inbox: new BullMQInbox({ queue }) }))
app.get('/healthz', async (_req, res) => res.json(await queue.getJobCounts('waiting', 'active', 'delayed', 'failed')))
app.use(express.json())

const server = createServer(app)
server.once('error', (error) => {
  const why = error.code === 'EADDRINUSE' ? `port ${port} is already in use (set PORT to a free one)` : error.message
  console.error(`Cannot listen on 127.0.0.1:${port}: ${why}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => {
  void worker.run()
  console.log(`Express receiving into a BullMQInbox on http://127.0.0.1:${port}/webhooks/svc (a BullMQ Worker in this process)`)
})

// Graceful stop: take no new deliveries, let the Worker finish the jobs it holds, then close.
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
  await Promise.all([closed, worker.close()])
  await queue.close()
  await client.quit()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
