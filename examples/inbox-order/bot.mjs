// A conversation reply bot with order kept: `REDIS_URL=redis://127.0.0.1:6379 SVC_WEBHOOK_SECRET=svc_whsec_... node examples/inbox-order/bot.mjs`
// Messages of one conversation reach the bot one at a time and in the order they were written
// (message.created_at), even when the sender's retries deliver them out of order and several
// bot processes share the Redis: `ordering: byConversation` on the inbox. Different conversations are answered
// at the same time. The bot keeps each conversation's transcript and answers each message with
// its place in it: out of order, the transcript would be wrong. POST /admin/pause and
// /admin/resume stop and start every bot process on this Redis (the webhook is still answered
// 202 meanwhile, nothing is lost); GET /healthz shows depth, dead letters and whether paused.
import { createServer } from 'node:http'
import express from 'express'
import { Redis } from 'ioredis'
import { byConversation, createInboxWorker } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { RedisInbox } from 'svc-webhooks/redis'

const secret = process.env.SVC_WEBHOOK_SECRET
if (!secret) {
  console.error('Set SVC_WEBHOOK_SECRET to the endpoint\'s signing secret (svc_whsec_...), e.g.\n  SVC_WEBHOOK_SECRET=svc_whsec_test node examples/inbox-order/bot.mjs')
  process.exit(1)
}
const port = Number(process.env.PORT ?? 3000)

const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
client.on('error', (error) => console.error(`Redis: ${error.message}`)) // ioredis reconnects by itself
try {
  await client.connect()
} catch (error) {
  console.error(`Cannot reach Redis at REDIS_URL: ${error.message}`)
  process.exit(1)
}
// One conversation's messages one at a time, in created_at order, across every bot process.
// Given to the inbox, the receiver files each delivery under its conversation as it accepts it,
// and the worker takes the ordering from the inbox.
const inbox = new RedisInbox({ client, ordering: byConversation })

/** The bot's memory of each conversation. In a real bot: your database, or the model's context. */
const transcripts = new Map()

const worker = createInboxWorker({
  inbox,
  concurrency: 8,
  on: {
    'message.received': async (event, delivery) => {
      const transcript = transcripts.get(event.conversation_id) ?? []
      transcript.push(event.message.text)
      transcripts.set(event.conversation_id, transcript)
      // Where the reply would be sent through the service's API.
      const reply = `(${transcript.length}) you said "${event.message.text}"`
      console.log(`conversation ${event.conversation_id} #${transcript.length} ${event.message.created_at} ${JSON.stringify(event.message.text)} -> ${reply}${delivery.late ? ' [late: a later message was answered first]' : ''}`)
    },
  },
})

const app = express()
// The webhook route comes before express.json(): the signature covers the raw bytes.
app.post('/webhooks/svc', webhooks({ secret, inbox }))
app.get('/healthz', async (_req, res) => res.json(await inbox.stats()))
// Guard these in a real deployment (an admin network, a token): they stop every bot.
app.post('/admin/pause', async (req, res) => {
  await worker.pause(String(req.query.by ?? 'an operator'))
  res.json(await inbox.stats())
})
app.post('/admin/resume', async (_req, res) => {
  await worker.resume()
  res.json(await inbox.stats())
})
app.use(express.json())

const server = createServer(app)
server.once('error', (error) => {
  const why = error.code === 'EADDRINUSE' ? `port ${port} is already in use (set PORT to a free one)` : error.message
  console.error(`Cannot listen on 127.0.0.1:${port}: ${why}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => {
  worker.start()
  console.log(`Reply bot receiving into a RedisInbox on http://127.0.0.1:${port}/webhooks/svc, one conversation's messages in order`)
})

// Graceful stop: take no new deliveries, let the bot finish what it holds, close Redis, exit.
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
  await client.quit()
  process.exit(0)
}
process.once('SIGTERM', () => void shutdown('SIGTERM'))
process.once('SIGINT', () => void shutdown('SIGINT'))
