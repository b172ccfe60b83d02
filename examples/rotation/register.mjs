// Registers a new endpoint whose secret goes straight into Redis, never to the terminal:
// `SVC_API_URL=... SVC_API_TOKEN=svc_pat_... SVC_BUSINESS_ID=... REDIS_URL=... node examples/rotation/register.mjs https://example.com/webhooks/svc`
// A delivery the service sends before the secret is stored is answered 503 and comes back.
import { Redis } from 'ioredis'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { createServiceClient, registerEndpoint } from 'svc-webhooks/service'

const { SVC_API_URL, SVC_API_TOKEN, SVC_BUSINESS_ID } = process.env
const url = process.argv[2]
if (!SVC_API_URL || !SVC_API_TOKEN || !SVC_BUSINESS_ID || !url) {
  console.error('Set SVC_API_URL, SVC_API_TOKEN (svc_pat_...) and SVC_BUSINESS_ID, and give the endpoint\'s URL: node examples/rotation/register.mjs https://...')
  process.exit(1)
}
const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
const service = createServiceClient({ baseUrl: SVC_API_URL, token: SVC_API_TOKEN, businessId: SVC_BUSINESS_ID })
const source = new RedisSecretSource({ client, key: process.env.SECRET_KEY ?? 'svc:webhook-secret' })

try {
  const endpoint = await registerEndpoint({ service, url, label: process.env.LABEL ?? 'rotation example', source })
  console.log(`registered ${endpoint.id}: its secret is in Redis. SVC_ENDPOINT_ID=${endpoint.id}`)
} catch (error) {
  console.error(`${error.name} ${error.code ?? ''}: ${error.message}`)
  process.exitCode = 1
} finally {
  await client.quit()
}
