// One rotating process of test/service/two-rotations.test.ts: rotateEndpointSecret from the built
// package, against the service emulator, on a RedisSecretSource. Config by environment: ROT_REDIS_URL,
// ROT_KEY, ROT_API (JSON { baseUrl, token, businessId, endpointId }). Prints "ROTATED <endpoint id>"
// or "FAILED <code>", and exits without waiting for the grace step.
import { Redis } from 'ioredis'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { createServiceClient, rotateEndpointSecret } from 'svc-webhooks/service'

const { ROT_REDIS_URL, ROT_KEY, ROT_API } = process.env
const api = JSON.parse(ROT_API)
const client = new Redis(ROT_REDIS_URL)
const source = new RedisSecretSource({ client, key: ROT_KEY })
const service = createServiceClient({ baseUrl: api.baseUrl, token: api.token, businessId: api.businessId })
try {
  const { endpoint } = await rotateEndpointSecret({ service, endpointId: api.endpointId, source, graceMs: 60_000, log: false })
  console.log(`ROTATED ${endpoint.id}`)
} catch (error) {
  console.log(`FAILED ${error.code ?? error.name}`)
}
client.disconnect()
process.exit(0)
