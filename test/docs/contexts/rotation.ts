// context: a script with an ioredis client `redis`, and SVC_API_URL, SVC_API_TOKEN,
// SVC_BUSINESS_ID and SVC_ENDPOINT_ID set (here: the package's service emulator, with one
// endpoint, its secret stored under "svc:webhook-secret"). Timers of a minute or more fire after 10 ms, so a rotation's 5 min grace passes at
// once. It exits once the fragment has run.
// runs as: script
import * as ioredis from 'ioredis'
import * as redisEntry from 'svc-webhooks/redis'
import * as testing from 'svc-webhooks/testing'

const realSetTimeout = globalThis.setTimeout
globalThis.setTimeout = ((fn: () => void, ms?: number, ...args: unknown[]) => realSetTimeout(fn, (ms ?? 0) >= 60_000 ? 10 : ms, ...args)) as typeof setTimeout

const emulator = await testing.createServiceEmulator()
process.env.SVC_API_URL = emulator.baseUrl
process.env.SVC_API_TOKEN = emulator.token
process.env.SVC_BUSINESS_ID = emulator.businessId
const setup = await fetch(`${emulator.baseUrl}/api/v1/webhook-endpoints`, {
  method: 'POST',
  headers: { authorization: `Bearer ${emulator.token}`, 'business-id': emulator.businessId, 'content-type': 'application/json' },
  body: JSON.stringify({ label: 'docs', url: 'https://example.com/webhooks/svc', subscribed_events: [] }),
})
const created = (await setup.json()) as { id: string; signing_secret: string }
process.env.SVC_ENDPOINT_ID = created.id
const redis = new ioredis.Redis(process.env.REDIS_URL!)
// The secret the receivers read today, where the rotation finds it.
await new redisEntry.RedisSecretSource({ client: redis, key: 'svc:webhook-secret' }).write({ secrets: [created.signing_secret] })
/* fragment */
redis.disconnect()
await emulator.close()
process.exit(0)
