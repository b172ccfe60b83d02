/**
 * RedisInbox against a real redis-server on 127.0.0.1, through both supported clients (ioredis
 * and node-redis): the shared inbox contract (a fresh prefix per inbox), raw bytes of every value
 * and a 1 MiB body, one round trip per operation (the server's INFO commandstats), a crash and
 * restart with the append-only file on, a frozen Redis (a late take hands its entries back), an
 * append while Redis is down (503 within `timeoutMs`), and 4 workers draining 200 deliveries
 * exactly once.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createInboxWorker, createWebhookReceiver } from 'svc-webhooks'
import { RedisInbox, type RedisInboxOptions } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithRedis, startRedisServer, type RedisServer } from '../support/redis-server.js'
import { describeInboxContract, inboxDelivery } from './contract.js'

const SECRET = 'svc_whsec_redis_inbox_tests'

type Connection = { client: RedisInboxOptions['client']; admin: (...args: string[]) => Promise<unknown>; close: () => Promise<void> }

/** Both clients, each wrapped so the suites can connect, talk to Redis and close it alike. */
const clients: Record<string, (url: string) => Promise<Connection>> = {
  ioredis: async (url) => {
    const client = new Redis(url, { lazyConnect: true })
    client.on('error', () => {}) // reconnects are expected in the fault tests
    await client.connect()
    return { client, admin: (...args) => client.call(args[0]!, ...args.slice(1)), close: async () => void client.disconnect() }
  },
  'node-redis': async (url) => {
    const client = createClient({ url })
    client.on('error', () => {}) // node-redis throws on an 'error' event nobody listens to
    await client.connect()
    return { client, admin: (...args) => client.sendCommand(args), close: async () => void client.destroy() }
  },
}

/** Calls of each command since the last CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(admin: Connection['admin']): Promise<Record<string, number>> {
  const info = String(await admin('INFO', 'commandstats'))
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2])
  return calls
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithRedis('RedisInbox', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  for (const [name, connect] of Object.entries(clients)) {
    describe(`over ${name}`, () => {
      let conn: Connection
      let n = 0
      beforeAll(async () => {
        conn = await connect(server.url)
      })
      afterAll(async () => {
        await conn?.close()
      })

      describeInboxContract(`RedisInbox over ${name}`, async ({ retentionMs }) => new RedisInbox({ client: conn.client, prefix: `contract-${name}-${++n}:`, retentionMs }))

      it('keeps every byte value and a 1 MiB body byte for byte, in waiting entries and dead letters', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `bytes-${name}:` })
        const everyByte = new Uint8Array(512).map((_, i) => i % 256)
        const large = new Uint8Array(randomBytes(1024 * 1024))
        // A view into a larger buffer: only its own bytes may be stored.
        const view = new Uint8Array([9, 9, 0xf0, 0x9f, 0x98, 0x80, 0xed, 0xa0, 0x80, 9]).subarray(2, 9)
        const sent = [everyByte, large, view, new Uint8Array(0)].map((rawBody) => inboxDelivery({ rawBody }))
        for (const d of sent) expect(await inbox.append(d)).toBe('accepted')
        const taken = await inbox.take(10, 10_000)
        expect(taken.map((e) => e.id).sort()).toEqual(sent.map((d) => d.id).sort())
        for (const entry of taken) {
          const d = sent.find((s) => s.id === entry.id)!
          expect(Buffer.from(entry.rawBody).equals(Buffer.from(d.rawBody))).toBe(true)
          expect(entry.rawBody.buffer.byteLength).toBe(d.rawBody.byteLength)
          expect(await inbox.bury(entry, 'Error: kept for the test')).toBe(true)
        }
        const dead = await inbox.dead()
        expect(dead).toHaveLength(4)
        for (const letter of dead) expect(Buffer.from(letter.rawBody).equals(Buffer.from(sent.find((s) => s.id === letter.id)!.rawBody))).toBe(true)
      })

      it('costs one EVAL round trip per operation (server-side INFO commandstats)', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `trips-${name}:` })
        const d = inboxDelivery({ keys: ['ep:trip', 'ep:v1 trip'] })
        await conn.admin('CONFIG', 'RESETSTAT')
        await inbox.append(d)
        await inbox.append(d)
        const [entry] = await inbox.take(4, 10_000)
        await inbox.extend(entry!, 10_000)
        await inbox.retry(entry!, 1, 'Error: once')
        await sleep(20)
        const [again] = await inbox.take(4, 10_000)
        await inbox.complete(again!)
        await inbox.stats()
        const calls = await commandCalls(conn.admin)
        expect(calls.eval).toBe(8)
        console.info(`[RedisInbox/${name}] 8 operations, 8 round trips; commands run inside the scripts: ${JSON.stringify(calls)}`)
      })

      it('keeps every key under its prefix, no lastError before a failure, and a retry or complete repeated by the same lease answers the same', async () => {
        const prefix = `layout-${randomUUID()}:`
        const inbox = new RedisInbox({ client: conn.client, prefix })
        const d = inboxDelivery()
        await inbox.append(d)
        const [entry] = await inbox.take(1, 10_000)
        expect(entry).not.toHaveProperty('lastError')
        expect(await inbox.retry(entry!, 1, 'Error: once')).toBe(true)
        expect(await inbox.retry(entry!, 1, 'Error: once')).toBe(true)
        await sleep(20)
        const [again] = await inbox.take(1, 10_000)
        expect(again).toMatchObject({ attempts: 1, lastError: 'Error: once' })
        expect(await inbox.complete(again!)).toBe(true)
        expect(await inbox.complete(again!)).toBe(true)
        expect(await inbox.complete(entry!)).toBe(false)
        const keys = (await conn.admin('KEYS', `${prefix}*`)) as string[]
        expect(keys.sort()).toEqual([`${prefix}k:${d.keys[0]}`, `${prefix}seq`].sort())
        const ttl = Number(await conn.admin('PTTL', `${prefix}k:${d.keys[0]}`))
        expect(ttl).toBeGreaterThan(71 * 3600_000)
      })

      it('take drops an entry whose hash was deleted by hand instead of failing every take', async () => {
        const prefix = `orphan-${name}:`
        const inbox = new RedisInbox({ client: conn.client, prefix })
        const lost = inboxDelivery()
        const kept = inboxDelivery()
        await inbox.append(lost)
        await inbox.append(kept)
        await conn.admin('DEL', `${prefix}e:${lost.keys[0]}`)
        expect((await inbox.take(10, 10_000)).map((entry) => entry.id)).toEqual([kept.id])
        expect((await inbox.stats()).depth).toBe(1)
      })

      it('refuses a delivery with a number that is not one before touching Redis (a script stopped half-way keeps its writes)', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `invalid-${name}:` })
        const d = inboxDelivery()
        await expect(inbox.append({ ...d, receivedAt: Number.NaN })).rejects.toThrow(TypeError)
        expect(await inbox.append(d)).toBe('accepted')
        expect(await inbox.dead(Infinity)).toEqual([])
      })

      it('refuses what is not a Redis client and bad options at construction', () => {
        expect(() => new RedisInbox({ client: {} as never })).toThrow(/RedisInbox needs `client`/)
        expect(() => new RedisInbox({ client: conn.client, timeoutMs: 0 })).toThrow(TypeError)
        expect(() => new RedisInbox({ client: conn.client, retentionMs: -1 })).toThrow(TypeError)
        expect(() => new RedisInbox({ client: conn.client, prefix: 1 as never })).toThrow(TypeError)
      })

      it('createInboxWorker: 4 workers with concurrency 4 on one RedisInbox process 200 deliveries exactly once each', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `workers-${name}:` })
        const receiver = createWebhookReceiver({ secret: SECRET, inbox })
        const ids = Array.from({ length: 200 }, () => randomUUID())
        for (const id of ids) {
          const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id })
          expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(202)
        }
        const runs = new Map<string, number>()
        let finished!: () => void
        const allDone = new Promise<void>((resolve) => (finished = resolve))
        const workers = Array.from({ length: 4 }, () =>
          createInboxWorker({
            inbox,
            concurrency: 4,
            pollIntervalMs: 10,
            on: {
              'message.received': async (_event, delivery) => {
                await sleep(Math.random() * 5)
                runs.set(delivery.id, (runs.get(delivery.id) ?? 0) + 1)
                if (runs.size === ids.length) finished()
              },
            },
          }),
        )
        for (const worker of workers) worker.start()
        await Promise.race([allDone, sleep(20_000)])
        await Promise.all(workers.map((worker) => worker.stop()))
        expect([...runs.keys()].sort()).toEqual([...ids].sort())
        expect([...runs.values()].every((count) => count === 1)).toBe(true)
        expect(await inbox.stats()).toEqual({ depth: 0, oldestAgeMs: 0, retrying: 0, dead: 0 })
      })
    })

    describe(`over ${name}: Redis crashed, down, back`, () => {
      let faulty: RedisServer
      let conn: Connection
      beforeAll(async () => {
        faulty = await startRedisServer({ persist: true })
        conn = await connect(faulty.url)
      })
      afterAll(async () => {
        await conn?.close()
        await faulty?.stop()
      })

      it('survives a crash (SIGKILL) and restart with appendonly yes, appendfsync always: accepted deliveries are still there and takeable', async () => {
        const persistence = String(await conn.admin('INFO', 'persistence'))
        expect(persistence).toMatch(/^aof_enabled:1\r?$/m)
        const fsync = await conn.admin('CONFIG', 'GET', 'appendfsync')
        // ioredis replies a flat array, node-redis (RESP3) a map.
        expect(fsync instanceof Map ? [...fsync.entries()].flat() : Array.isArray(fsync) ? fsync : Object.entries(fsync as object).flat()).toEqual(['appendfsync', 'always'])
        const inbox = new RedisInbox({ client: conn.client, prefix: 'aof:', timeoutMs: 10_000 })
        const sent = Array.from({ length: 20 }, (_, i) => inboxDelivery({ rawBody: new Uint8Array(randomBytes(i * 1000)) }))
        for (const d of sent) expect(await inbox.append(d)).toBe('accepted')
        const [done] = await inbox.take(1, 10_000)
        expect(await inbox.complete(done!)).toBe(true)
        const [failed] = await inbox.take(1, 10_000)
        expect(await inbox.bury(failed!, 'Error: gave up')).toBe(true)
        const pid = faulty.pid
        await faulty.restart({ signal: 'SIGKILL' })
        expect(faulty.pid).not.toBe(pid)
        expect(await inbox.stats()).toMatchObject({ depth: 18, dead: 1 })
        const taken = await inbox.take(100, 10_000)
        const waiting = sent.filter((d) => d.id !== done!.id && d.id !== failed!.id)
        expect(taken.map((e) => e.id).sort()).toEqual(waiting.map((d) => d.id).sort())
        for (const entry of taken) expect(Buffer.from(entry.rawBody).equals(Buffer.from(sent.find((d) => d.id === entry.id)!.rawBody))).toBe(true)
        expect(await inbox.append({ ...done!, receivedAt: Date.now() })).toBe('duplicate')
        expect((await inbox.dead()).map((letter) => letter.id)).toEqual([failed!.id])
      })

      it('Redis frozen: take rejects within timeoutMs, and what the late take leased is handed back at once, not after the lease', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: 'frozen:', timeoutMs: 300 })
        const sent = [inboxDelivery(), inboxDelivery(), inboxDelivery()]
        for (const d of sent) await inbox.append(d)
        faulty.pause()
        try {
          await expect(inbox.take(10, 60_000)).rejects.toThrow(/RedisInbox.take got no answer within 300 ms/)
        } finally {
          faulty.resume()
        }
        let taken: string[] = []
        for (let i = 0; i < 40 && taken.length === 0; i++) {
          await sleep(25)
          taken = (await inbox.take(10, 60_000)).map((entry) => entry.id)
        }
        expect(taken.sort()).toEqual(sent.map((d) => d.id).sort())
        // Two takes drew lease tokens: the late one did run, and its leases were given back.
        expect(String(await conn.admin('GET', 'frozen:seq'))).toBe('6')
      })

      it('Redis down: append rejects within timeoutMs and the receiver answers 503 with Retry-After; once back the resend is accepted', async () => {
        const timeoutMs = 300
        const inbox = new RedisInbox({ client: conn.client, prefix: 'down:', timeoutMs })
        const receiver = createWebhookReceiver({ secret: SECRET, inbox })
        await faulty.kill()
        const started = Date.now()
        await expect(inbox.append(inboxDelivery())).rejects.toThrow(/RedisInbox.append got no answer within 300 ms/)
        const elapsed = Date.now() - started
        expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 10)
        const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id: randomUUID() })
        const down = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
        expect(down.status).toBe(503)
        expect(down.headers['retry-after']).toBeDefined()
        expect(JSON.parse(down.body)).toEqual({ ok: false, code: 'inbox_unavailable' })
        await faulty.start()
        let answer = down
        for (let i = 0; i < 100 && answer.status === 503; i++) {
          await sleep(50)
          answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
        }
        // The appends sent while it was down may land once it is back (the client queues them):
        // then the resend finds its own delivery already accepted, a duplicate. Either way it is in once.
        expect([200, 202]).toContain(answer.status)
        const ids = (await inbox.take(10, 10_000)).map((entry) => entry.id)
        expect(ids.filter((id) => id === signed.id)).toHaveLength(1)
        expect(new Set(ids).size).toBe(ids.length)
      })
    })
  }
})
