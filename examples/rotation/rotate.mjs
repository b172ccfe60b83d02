// Rotates the endpoint's secret with no delivery refused for good:
// `SVC_API_URL=... SVC_API_TOKEN=svc_pat_... SVC_BUSINESS_ID=... SVC_ENDPOINT_ID=... REDIS_URL=... node examples/rotation/rotate.mjs`
// Marks the secret in Redis pending, calls rotate-secret, stores [new, old], and after GRACE_MS
// (default 5 minutes) [new]. A failure says what Redis holds; run it again to repair a crash.
import { Redis } from 'ioredis'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { createServiceClient, rotateEndpointSecret } from 'svc-webhooks/service'

const { SVC_API_URL, SVC_API_TOKEN, SVC_BUSINESS_ID, SVC_ENDPOINT_ID } = process.env
if (!SVC_API_URL || !SVC_API_TOKEN || !SVC_BUSINESS_ID || !SVC_ENDPOINT_ID) {
  console.error('Set SVC_API_URL, SVC_API_TOKEN (svc_pat_...), SVC_BUSINESS_ID and SVC_ENDPOINT_ID.')
  process.exit(1)
}
const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
const service = createServiceClient({ baseUrl: SVC_API_URL, token: SVC_API_TOKEN, businessId: SVC_BUSINESS_ID })
const source = new RedisSecretSource({ client, key: process.env.SECRET_KEY ?? 'svc:webhook-secret' })

try {
  const graceMs = process.env.GRACE_MS === undefined ? undefined : Number(process.env.GRACE_MS)
  const { endpoint, trimAt, finished } = await rotateEndpointSecret({ service, endpointId: SVC_ENDPOINT_ID, source, ...(graceMs !== undefined && { graceMs }) })
  console.log(`rotated ${endpoint.id}: the new secret is stored beside the old one; the old one is dropped at ${new Date(trimAt).toISOString()}`)
  await finished
  console.log('the old secret is dropped: done')
} catch (error) {
  // An EndpointLifecycleError's code says what Redis holds: refused, outcome_unknown or source_failed.
  console.error(`${error.name} ${error.code ?? ''}: ${error.message}`)
  process.exitCode = 1
} finally {
  await client.quit()
}
