// A receiver whose secret lives in Redis, so a rotation reaches every process without a restart:
// `REDIS_URL=redis://127.0.0.1:6379 node examples/rotation/receiver.mjs`
// With SVC_API_URL, SVC_API_TOKEN, SVC_BUSINESS_ID and SVC_ENDPOINT_ID set, it also watches its
// endpoint at the service and enables it again once this receiver is ready.
import { createServer } from 'node:http'
import { Redis } from 'ioredis'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisSecretSource, RedisStore } from 'svc-webhooks/redis'
import { createServiceClient, endpointWatcher } from 'svc-webhooks/service'

const port = Number(process.env.PORT ?? 3000)
const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
client.on('error', (error) => console.error(`Redis: ${error.message}`)) // ioredis reconnects by itself
try {
  await client.connect()
} catch (error) {
  console.error(`Cannot reach Redis at REDIS_URL: ${error.message}`)
  process.exit(1)
}

const { SVC_API_URL, SVC_API_TOKEN, SVC_BUSINESS_ID, SVC_ENDPOINT_ID } = process.env
const watch = SVC_API_URL && SVC_API_TOKEN && SVC_BUSINESS_ID && SVC_ENDPOINT_ID
  ? endpointWatcher({
      service: createServiceClient({ baseUrl: SVC_API_URL, token: SVC_API_TOKEN, businessId: SVC_BUSINESS_ID }),
      endpointId: SVC_ENDPOINT_ID,
      reenable: true,
      intervalMs: Number(process.env.WATCH_INTERVAL_MS ?? 60_000),
    })
  : undefined

const handle = createNodeHandler({
  // Written by register.mjs and rotate.mjs; read through a cache, and again on a mismatch.
  secret: new RedisSecretSource({ client, key: process.env.SECRET_KEY ?? 'svc:webhook-secret' }),
  store: new RedisStore({ client }),
  on: {
    'message.received': async (event, delivery) => {
      console.log(`processed ${event.event} ${delivery.id}`)
    },
  },
  ...(watch && { watch }),
})

const server = createServer((req, res) => {
  if (req.url === '/webhooks/svc') return handle(req, res)
  if (req.url === '/healthz') return void handle.stats().then((stats) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats)))
  res.writeHead(404).end()
})
server.on('error', (error) => {
  console.error(`Cannot listen on 127.0.0.1:${port}: ${error.message}`)
  process.exit(1)
})
server.listen(port, '127.0.0.1', () => console.log(`receiving on http://127.0.0.1:${server.address().port}/webhooks/svc${watch ? `, watching endpoint ${SVC_ENDPOINT_ID}` : ''}`))

process.once('SIGTERM', () => {
  server.close()
  server.closeIdleConnections()
  void client.quit().then(() => process.exit(0))
})
