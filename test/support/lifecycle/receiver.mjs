// One receiver process of the lifecycle bars (test/service/lifecycle-bars.test.ts): node:http +
// createNodeHandler (svc-webhooks/node) from the built package, RedisStore on the shared Redis,
// and a handler that counts each delivery's runs in Redis (`runs` hash), the record the
// exactly-once checks read.
// Config by environment: LC_REDIS_URL; the secret from LC_SECRET_KEY (a RedisSecretSource) or
// LC_SECRET (a comma-separated list, as an environment secret is deployed); LC_PORT (0: any);
// LC_LOG_FILE (the receiver's own log lines appended there, as a deployment's log collects them); LC_WATCH (JSON { baseUrl, token,
// businessId, endpointId, intervalMs }: watch the endpoint with reenable). Prints "READY <port>".
import { appendFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { Redis } from 'ioredis'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisSecretSource, RedisStore } from 'svc-webhooks/redis'
import { createServiceClient, endpointWatcher } from 'svc-webhooks/service'

const { LC_REDIS_URL, LC_SECRET_KEY, LC_SECRET, LC_PORT = '0', LC_LOG_FILE, LC_WATCH } = process.env
const client = new Redis(LC_REDIS_URL, { lazyConnect: true })
client.on('error', () => {}) // reconnects are expected
await client.connect()

const secret = LC_SECRET_KEY ? new RedisSecretSource({ client, key: LC_SECRET_KEY }) : LC_SECRET.split(',')
const watching = LC_WATCH && JSON.parse(LC_WATCH)
const handle = createNodeHandler({
  secret,
  store: new RedisStore({ client }),
  on: {
    'message.received': async (_event, delivery) => {
      await client.hincrby('runs', delivery.id, 1)
    },
  },
  log: LC_LOG_FILE ? (line) => appendFileSync(LC_LOG_FILE, `${line}\n`) : false,
  ...(watching && {
    watch: endpointWatcher({
      service: createServiceClient({ baseUrl: watching.baseUrl, token: watching.token, businessId: watching.businessId }),
      endpointId: watching.endpointId,
      reenable: true,
      intervalMs: watching.intervalMs,
    }),
  }),
})

const server = createServer(handle)
server.keepAliveTimeout = 500
server.listen(Number(LC_PORT), '127.0.0.1', () => console.log(`READY ${server.address().port}`))
process.once('SIGTERM', () => {
  server.close(() => void client.quit().then(() => process.exit(0)))
  server.closeIdleConnections()
})
