// Durable inbox on Redis: `REDIS_URL=redis://127.0.0.1:6379 SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-redis/server.mjs`
// The receiver answers 202 once Redis acknowledged the delivery, so a slow or failing handler
// never makes the sender retry or disable the endpoint. By default a worker runs in this process
// too; with INBOX_WORKER=off this process only accepts, and worker.mjs (as many processes, on as
// many machines, as you like) runs the handlers. Run Redis with `appendonly yes` and
// `appendfsync always` so what was answered 202 survives a Redis crash.
import { createServer } from 'node:http'
import express from 'express'
import { Redis } from 'ioredis'
import { createInboxWorker } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { RedisInbox } from 'svc-webhooks/redis'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-redis/server.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)
const runWorker = process.env.INBOX_WORKER !== 'off'

const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
client.on('error', (error) => console.error(`Redis: ${error.message}`)) // ioredis reconnects by itself
try {
  await client.connect()
} catch (error) {
  console.error(`Cannot reach Redis at REDIS_URL: ${error.message}`)
  process.exit(1)
}
const inbox = new RedisInbox({ client })

const worker = runWorker
  ? createInboxWorker({
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
  : undefined

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
  worker?.start()
  console.log(`Express receiving into a RedisInbox on http://127.0.0.1:${port}/webhooks/svc (${worker ? 'with a worker in this process' : 'accept only: run worker.mjs'})`)
})

// Graceful stop: take no new deliveries, let the worker finish what it holds (anything it could
// not finish goes to another worker once its lease expires), then close Redis and exit.
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
  await Promise.all([closed, worker?.stop(15_000)])
  await client.quit()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
