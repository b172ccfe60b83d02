/**
 * RedisStore against a real redis-server on 127.0.0.1, through both supported clients (ioredis
 * and node-redis): the shared store contract, the key layout, the round trips per delivery
 * (counted by the server's INFO commandstats), and the receiver's answers while Redis is frozen,
 * down, and back again.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver } from 'svc-webhooks'
import { RedisStore } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { describeStoreContract, eventually } from './contract.js'

const SECRET = 'svc_whsec_redis_tests'

/** Both clients, each wrapped so the suites can connect, talk to Redis and close it alike. */
const clients = {
  ioredis: async (url: string) => {
    const client = new Redis(url, { lazyConnect: true })
    client.on('error', () => {}) // reconnects are expected in the fault tests
    await client.connect()
    return { client, admin: (...args: string[]) => client.call(args[0]!, ...args.slice(1)), close: async () => void client.disconnect() }
  },
  'node-redis': async (url: string) => {
    const client = createClient({ url })
    client.on('error', () => {}) // node-redis throws on an 'error' event nobody listens to
    await client.connect()
    return { client, admin: (...args: string[]) => client.sendCommand(args), close: async () => void client.destroy() }
  },
}

async function deliver(receiver: ReturnType<typeof createWebhookReceiver>, id = randomUUID()) {
  const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id })
  return receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
}

/** Calls of each command since the last CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(admin: (...args: string[]) => Promise<unknown>): Promise<Record<string, number>> {
  const info = String(await admin('INFO', 'commandstats'))
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2])
  // Round trips that ran a script: by its text (EVAL) or, once the server holds it, by its SHA-1.
  calls.scripts = (calls.eval ?? 0) + (calls.evalsha ?? 0)
  return calls
}

describeWithRedis('RedisStore', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  for (const [name, connect] of Object.entries(clients)) {
    describe(`store contract: RedisStore over ${name}`, () => {
      describeStoreContract(async () => {
        const { client, close } = await connect(server.url)
        const prefix = `contract-${name}:`
        return {
          store: new RedisStore({ client, prefix }),
          isolated: () => new RedisStore({ client, prefix: `${prefix}other:` }),
          close,
        }
      })
    })

    describe(`RedisStore over ${name}`, () => {
      let conn: Awaited<ReturnType<(typeof clients)['ioredis']>> | Awaited<ReturnType<(typeof clients)['node-redis']>>
      beforeAll(async () => {
        conn = await connect(server.url)
      })
      afterAll(async () => {
        await conn?.close()
      })

      it('keeps a claim for the lease and a completion for the retention window, under the default prefix', async () => {
        const store = new RedisStore({ client: conn.client })
        const k = `layout:${randomUUID()}`
        await store.claim(k, 'owner-1', 60_000)
        expect(String(await conn.admin('GET', `svc-webhooks:${k}`))).toBe('c:owner-1')
        const leaseTtl = Number(await conn.admin('PTTL', `svc-webhooks:${k}`))
        expect(leaseTtl).toBeGreaterThan(0)
        expect(leaseTtl).toBeLessThanOrEqual(60_000)
        await store.complete(k, 'owner-1', 72 * 3600_000)
        expect(String(await conn.admin('GET', `svc-webhooks:${k}`))).toBe('d:owner-1')
        expect(Number(await conn.admin('PTTL', `svc-webhooks:${k}`))).toBeGreaterThan(60_000)
      })

      it('answers a repeated operation by the same owner the same way (safe to resend after a lost reply)', async () => {
        const store = new RedisStore({ client: conn.client, prefix: 'repeat:' })
        const k = randomUUID()
        expect(await store.claim(k, 'me', 60_000)).toBe('claimed')
        expect(await store.claim(k, 'me', 60_000)).toBe('claimed')
        expect(await store.complete(k, 'me', 60_000)).toBe(true)
        expect(await store.complete(k, 'me', 60_000)).toBe(true)
        expect(await store.claim(k, 'me', 60_000)).toBe('completed')
      })

      it('costs 2 round trips per fresh delivery and 1 per duplicate (server-side INFO commandstats)', async () => {
        const runs: string[] = []
        const receiver = createWebhookReceiver({
          secret: SECRET,
          store: new RedisStore({ client: conn.client, prefix: 'trips:' }),
          on: { 'message.received': (_e, d) => void runs.push(d.id) },
        })
        const ids = Array.from({ length: 20 }, () => randomUUID())
        await conn.admin('CONFIG', 'RESETSTAT')
        for (const id of ids) expect((await deliver(receiver, id)).status).toBe(200)
        const fresh = await commandCalls(conn.admin)
        await conn.admin('CONFIG', 'RESETSTAT')
        for (const id of ids) expect((await deliver(receiver, id)).status).toBe(200)
        const duplicates = await commandCalls(conn.admin)
        // Commands a client sent (EVAL, EVALSHA); the GET/SET/DEL inside the scripts are counted separately.
        expect(fresh.scripts).toBe(2 * ids.length)
        expect(duplicates.scripts).toBe(ids.length)
        expect(runs).toHaveLength(ids.length)
        console.info(
          `[RedisStore/${name}] round trips per fresh delivery: ${fresh.scripts! / ids.length}, per duplicate: ${duplicates.scripts! / ids.length}` +
            ` (server commands incl. inside scripts: ${JSON.stringify(fresh)} for ${ids.length} deliveries)`,
        )
      })

      it('refuses what is not a Redis client and a bad timeout at construction', () => {
        expect(() => new RedisStore({ client: {} as never })).toThrow(TypeError)
        expect(() => new RedisStore({ client: conn.client, timeoutMs: 0 })).toThrow(TypeError)
      })
    })

    describe(`receiver with RedisStore over ${name}: Redis frozen, down, back`, () => {
      let faulty: RedisServer
      let conn: Awaited<ReturnType<(typeof clients)['ioredis']>> | Awaited<ReturnType<(typeof clients)['node-redis']>>
      const runs: string[] = []
      let receiver: ReturnType<typeof createWebhookReceiver>
      beforeAll(async () => {
        faulty = await startRedisServer()
        conn = await connect(faulty.url)
        receiver = createWebhookReceiver({
          secret: SECRET,
          store: new RedisStore({ client: conn.client, timeoutMs: 300 }),
          on: { 'message.received': (_e, d) => void runs.push(d.id) },
        })
      })
      afterAll(async () => {
        await conn?.close()
        await faulty?.stop()
      })

      it('Redis frozen (no answers): 503 with Retry-After after the store timeout, handler not run; then the retry runs it once', async () => {
        const id = randomUUID()
        faulty.pause()
        let answer
        try {
          answer = await deliver(receiver, id)
        } finally {
          faulty.resume()
        }
        expect(answer.status).toBe(503)
        expect(answer.headers['retry-after']).toBe('5')
        expect(JSON.parse(answer.body)).toEqual({ ok: false, code: 'store_unavailable' })
        expect(runs).not.toContain(id)
        // The claim sent while frozen lands late and is given back, so the sender's retry is not held for a lease.
        expect(await eventually(async () => (await deliver(receiver, id)).status === 200)).toBe(true)
        expect(runs.filter((r) => r === id)).toHaveLength(1)
      })

      it('Redis killed: 503 and the handler does not run; after a restart deliveries succeed with the same receiver and client', async () => {
        await faulty.kill()
        const id = randomUUID()
        const down = await deliver(receiver, id)
        expect(down.status).toBe(503)
        expect(down.headers['retry-after']).toBe('5')
        expect(runs).not.toContain(id)
        await faulty.start()
        expect(await eventually(async () => (await deliver(receiver, id)).status === 200)).toBe(true)
        expect(runs.filter((r) => r === id)).toHaveLength(1)
        const fresh = randomUUID()
        expect((await deliver(receiver, fresh)).status).toBe(200)
        expect((await deliver(receiver, fresh)).body).toContain('duplicate')
      })
    })
  }
})
