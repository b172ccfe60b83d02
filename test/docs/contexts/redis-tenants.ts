// context: docs/express.md's server.ts up to its route (`app`, `webhooks`, `on`), an ioredis
// client `redis`, `RedisSecretSource` imported and `knownTenants` (here "svc", whose secret is
// stored); it listens on $PORT after.
// runs as: server
import express from 'express'
import * as ioredis from 'ioredis'
import type { WebhookHandlers } from 'svc-webhooks'
import { webhooks } from 'svc-webhooks/express'
import { RedisSecretSource } from 'svc-webhooks/redis'

const redis = new ioredis.Redis(process.env.REDIS_URL!)
await new RedisSecretSource({ client: redis, key: 'svc-webhooks:secret:svc' }).write({ secrets: [process.env.SVC_WEBHOOK_SECRET!] })
const knownTenants = new Set(['svc'])
const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
const app = express()
/* fragment */
app.listen(Number(process.env.PORT), '127.0.0.1')
