// context: a script with a service client `service` (docs/lifecycle.md), an empty secret `source`,
// an ioredis client `redis`, `on`, `createNodeHandler` and `RedisStore` imported, and
// SVC_API_URL, SVC_API_TOKEN, SVC_BUSINESS_ID and SVC_ENDPOINT_ID set (here: the package's
// service emulator, with one endpoint). It exits once the fragment has run.
// runs as: script
import * as ioredis from 'ioredis'
import type { SecretSource, SecretState, WebhookHandlers } from 'svc-webhooks'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisStore } from 'svc-webhooks/redis'
import * as serviceApi from 'svc-webhooks/service'
import * as testing from 'svc-webhooks/testing'

const emulator = await testing.createServiceEmulator()
process.env.SVC_API_URL = emulator.baseUrl
process.env.SVC_API_TOKEN = emulator.token
process.env.SVC_BUSINESS_ID = emulator.businessId
const service = serviceApi.createServiceClient({ baseUrl: emulator.baseUrl, token: emulator.token, businessId: emulator.businessId })
const created = await service.endpoints.create({ label: 'docs', url: 'https://example.com/webhooks/svc', subscribed_events: [] })
process.env.SVC_ENDPOINT_ID = created.id
let state: SecretState = { secrets: [] }
const source: SecretSource = { read: async () => state, write: async (next) => void (state = next) }
const redis = new ioredis.Redis(process.env.REDIS_URL!)
const on: WebhookHandlers = { 'message.received': async (event) => console.log('message', event.message.id) }
void createNodeHandler, RedisStore, on
/* fragment */
redis.disconnect()
await emulator.close()
process.exit(0)
