// Inbox worker on its own: `REDIS_URL=redis://127.0.0.1:6379 node examples/inbox-redis/worker.mjs`
// Runs the handlers of the deliveries server.mjs (with INBOX_WORKER=off) accepted into Redis.
// Start as many as the load needs, on any machine that reaches Redis: each delivery is leased to
// one worker at a time, its handler succeeds once, failures are retried with backoff and end in
// the dead letters, and a crashed worker's deliveries are taken over when their lease expires.
import { Redis } from 'ioredis'
import { createInboxWorker } from 'svc-webhooks'
import { RedisInbox } from 'svc-webhooks/redis'

const concurrency = Number(process.env.CONCURRENCY ?? 4)

const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
client.on('error', (error) => console.error(`Redis: ${error.message}`)) // ioredis reconnects by itself
try {
  await client.connect()
} catch (error) {
  console.error(`Cannot reach Redis at REDIS_URL: ${error.message}`)
  process.exit(1)
}

const worker = createInboxWorker({
  inbox: new RedisInbox({ client }),
  concurrency,
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
worker.start()
console.log(`Worker ${process.pid} taking deliveries from Redis, ${concurrency} at a time`)

// Graceful stop: take nothing new, finish what is held (at most 15 s), close Redis, exit.
let stopping = false
async function shutdown(signal) {
  if (stopping) return
  stopping = true
  console.log(`${signal}: stopping`)
  setTimeout(() => {
    console.error('Still busy 20 s after the signal: exiting anyway.')
    process.exit(1)
  }, 20_000).unref()
  await worker.stop(15_000)
  await client.quit()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
