/**
 * RedisInbox against a real redis-server on 127.0.0.1, through both supported clients (ioredis
 * and node-redis): the shared inbox contract (a fresh prefix per inbox), raw bytes of every value
 * and a 1 MiB body, one round trip per operation (the server's INFO commandstats), unreadable
 * entries written by hand (buried, not blocking the others), durability warnings with and
 * without appendonly, a crash and restart with the append-only file on, out of memory under
 * `maxmemory 1mb` + `noeviction` (refused at once, no body in the error), a frozen Redis (a late
 * take hands its entries back, uncounted; an unreadable one in it throws nothing unhandled), an
 * append while Redis is down (503 within `timeoutMs`), a restart from an RDB snapshot without
 * AOF (no lease token handed out twice, the stale holder refused), and 4 workers draining 200
 * deliveries exactly once.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createInboxWorker, createWebhookReceiver, isInboxError, type InboxError } from 'svc-webhooks'
import { RedisInbox, type RedisInboxOptions } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { eventually } from '../stores/contract.js'
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
  // Round trips that ran a script: by its text (EVAL) or, once the server holds it, by its SHA-1.
  calls.scripts = (calls.eval ?? 0) + (calls.evalsha ?? 0)
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

      it('costs one script round trip per operation (server-side INFO commandstats)', async () => {
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
        expect(calls.scripts).toBe(8)
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
        // No lease counter: tokens are drawn at random by each take.
        expect(keys).toEqual([`${prefix}k:${d.keys[0]}`])
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

      it('an entry that cannot be read (a hash written by hand) goes to the dead letters with the reason; the others are taken as usual', async () => {
        const prefix = `corrupt-${name}:`
        const inbox = new RedisInbox({ client: conn.client, prefix })
        const kept = [inboxDelivery(), inboxDelivery()]
        for (const d of kept) await inbox.append(d)
        await conn.admin('HSET', `${prefix}e:junk-json`, 'keys', 'not json', 'body', 'AA==', 'state', 'waiting', 'lease', '', 'leaseUntil', '0')
        await conn.admin('HSET', `${prefix}e:junk-fields`, 'colour', 'blue', 'state', 'waiting', 'lease', '', 'leaseUntil', '0')
        await conn.admin('ZADD', `${prefix}due`, '0', 'junk-json', '0', 'junk-fields')
        const taken = await inbox.take(10, 10_000)
        expect(taken.map((entry) => entry.id).sort()).toEqual(kept.map((d) => d.id).sort())
        expect(await eventually(async () => (await inbox.stats()).dead === 2)).toBe(true)
        const dead = await inbox.dead()
        expect(dead.map((letter) => letter.keys[0]).sort()).toEqual(['junk-fields', 'junk-json'])
        for (const letter of dead) expect(letter.lastError).toMatch(/cannot read/)
        expect(await inbox.take(10, 10_000)).toEqual([])
        expect(await inbox.purge('junk-json')).toBe(true)
        expect(await inbox.purge('junk-fields')).toBe(true)
        expect(await inbox.stats()).toMatchObject({ depth: 2, dead: 0 })
      })

      it('a key of the wrong type under the prefix: take is refused at once (WRONGTYPE), not reported unreachable', async () => {
        const prefix = `wrongtype-${name}:`
        await conn.admin('SET', `${prefix}due`, 'not a sorted set')
        const inbox = new RedisInbox({ client: conn.client, prefix, timeoutMs: 5_000 })
        const error = await inbox.take(1, 10_000).catch((e: unknown) => e)
        expect(error).toMatchObject({ name: 'InboxError', kind: 'refused', operation: 'RedisInbox.take', message: expect.stringMatching(/was refused by the server: WRONGTYPE/) })
      })

      it('durabilityWarnings: appendonly off is reported, and an evicting maxmemory-policy too (read with INFO inside a script)', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `warn-${name}:` })
        const warnings = await inbox.durabilityWarnings()
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toMatch(/without appendonly/)
        await conn.admin('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')
        try {
          const both = await inbox.durabilityWarnings()
          expect(both).toHaveLength(2)
          expect(both[1]).toMatch(/maxmemory-policy is allkeys-lru/)
        } finally {
          await conn.admin('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
        }
      })

      it('durabilityWarnings: a user the server forbids INFO gets one line saying the settings could not be checked', async () => {
        const user = `no-info-${name}`
        await conn.admin('ACL', 'SETUSER', user, 'on', 'nopass', '~*', '+@all', '-info')
        const limited = await connect(server.url.replace('redis://', `redis://${user}:x@`))
        try {
          const warnings = await new RedisInbox({ client: limited.client, prefix: `warn-acl-${name}:` }).durabilityWarnings()
          expect(warnings).toHaveLength(1)
          expect(warnings[0]).toMatch(/^svc-webhooks: RedisInbox could not check the server's persistence and eviction settings \(RedisInbox.durabilityWarnings was refused by the server: ERR The user executing the script can't run this command/)
        } finally {
          await limited.close()
          await conn.admin('ACL', 'DELUSER', user)
        }
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
        expect(await inbox.stats()).toEqual({ depth: 0, oldestAgeMs: 0, retrying: 0, dead: 0, paused: false })
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

      it('Redis frozen: take rejects (unavailable) within timeoutMs, and what the late take leased is handed back at once, uncounted, not after the lease', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: 'frozen:', timeoutMs: 300 })
        const sent = [inboxDelivery(), inboxDelivery(), inboxDelivery()]
        for (const d of sent) await inbox.append(d)
        const dueBefore = Number(await conn.admin('ZSCORE', 'frozen:due', sent[0]!.keys[0]!))
        faulty.pause()
        try {
          const error = await inbox.take(10, 60_000).catch((e: unknown) => e)
          expect(isInboxError(error)).toBe(true)
          expect(error).toMatchObject({ kind: 'unavailable', operation: 'RedisInbox.take', message: expect.stringMatching(/RedisInbox.take got no answer within 300 ms/) })
        } finally {
          faulty.resume()
        }
        // The late take did run (it leased the entry, then the hand-back made it due at a later
        // time than its append did, and long before the lease's 60 s) and its leases were given back at once.
        const handedBack = async () => {
          const due = Number(await conn.admin('ZSCORE', 'frozen:due', sent[0]!.keys[0]!))
          return due > dueBefore && due < Date.now() + 30_000
        }
        expect(await eventually(handedBack)).toBe(true)
        const taken = await inbox.take(10, 60_000)
        expect(taken.map((entry) => entry.id).sort()).toEqual(sent.map((d) => d.id).sort())
        // The hand-back uncounted the take nobody ran.
        expect(taken.map((entry) => entry.takes)).toEqual([1, 1, 1])
      })

      it('a server that lost its scripts (SCRIPT FLUSH, as after a restart or a failover): the next call goes by text once, runs once, and by SHA-1 after', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: `noscript-${name}:` })
        // By text first; by SHA-1 once WebCrypto has hashed the script (a tick later).
        await inbox.append(inboxDelivery())
        await sleep(20)
        await conn.admin('CONFIG', 'RESETSTAT')
        await inbox.append(inboxDelivery())
        expect(await commandCalls(conn.admin)).toMatchObject({ evalsha: 1 })
        await conn.admin('SCRIPT', 'FLUSH')
        await conn.admin('CONFIG', 'RESETSTAT')
        expect(await inbox.append(inboxDelivery())).toBe('accepted')
        const info = String(await conn.admin('INFO', 'commandstats'))
        // The EVALSHA failed (NOSCRIPT, nothing ran), the EVAL ran it and cached it again.
        expect(info).toMatch(/cmdstat_evalsha:calls=\d+,[^\n]*failed_calls=1/)
        expect(await commandCalls(conn.admin)).toMatchObject({ eval: 1 })
        expect((await inbox.stats()).depth).toBe(3)
        await conn.admin('CONFIG', 'RESETSTAT')
        await inbox.append(inboxDelivery())
        expect(await commandCalls(conn.admin)).toMatchObject({ evalsha: 1 })
        expect((await commandCalls(conn.admin)).eval).toBeUndefined()
      })

      it('durabilityWarnings: none with appendonly yes and noeviction', async () => {
        expect(await new RedisInbox({ client: conn.client, prefix: 'warn:' }).durabilityWarnings()).toEqual([])
      })

      it('Redis out of memory (maxmemory 1mb, noeviction): append is refused at once, not retried, and neither message nor cause carries the body', async () => {
        const inbox = new RedisInbox({ client: conn.client, prefix: 'oom:', timeoutMs: 5_000 })
        const body = new Uint8Array(randomBytes(2 * 1024 * 1024))
        const base64 = Buffer.from(body).toString('base64')
        await conn.admin('CONFIG', 'SET', 'maxmemory', '1mb')
        let error: unknown
        try {
          await conn.admin('CONFIG', 'RESETSTAT')
          error = await inbox.append(inboxDelivery({ rawBody: body })).catch((e: unknown) => e)
          // One attempt: a refusal is not repeated until the deadline.
          expect((await commandCalls(conn.admin)).scripts).toBe(1)
        } finally {
          await conn.admin('CONFIG', 'SET', 'maxmemory', '0')
        }
        expect(isInboxError(error)).toBe(true)
        const refusal = error as InboxError
        expect(refusal).toMatchObject({ kind: 'refused', operation: 'RedisInbox.append' })
        expect(refusal.message).toMatch(/^svc-webhooks: RedisInbox.append was refused by the server: OOM command not allowed/)
        expect(refusal.message).not.toMatch(/reachable/)
        expect(Object.keys(refusal.cause as object).sort()).toEqual(['message', 'name'])
        const shown = JSON.stringify({ message: refusal.message, cause: refusal.cause, stack: refusal.stack })
        expect(shown).not.toContain(base64.slice(0, 64))
        expect(shown).not.toContain(base64.slice(-64))
        expect(await inbox.stats()).toMatchObject({ depth: 0 })
      })

      it('a late take holding an unreadable entry: no unhandled rejection, the readable entries handed back, the unreadable one buried', async () => {
        const prefix = 'late-corrupt:'
        const inbox = new RedisInbox({ client: conn.client, prefix, timeoutMs: 300 })
        const kept = inboxDelivery()
        await inbox.append(kept)
        await conn.admin('HSET', `${prefix}e:junk`, 'keys', '{"not": "a list"}', 'body', 'AA==', 'state', 'waiting', 'lease', '', 'leaseUntil', '0')
        await conn.admin('ZADD', `${prefix}due`, '0', 'junk')
        const unhandled: unknown[] = []
        const record = (reason: unknown) => void unhandled.push(reason)
        process.on('unhandledRejection', record)
        try {
          faulty.pause()
          try {
            await expect(inbox.take(10, 60_000)).rejects.toThrow(/RedisInbox.take got no answer within 300 ms/)
          } finally {
            faulty.resume()
          }
          expect(await eventually(async () => (await inbox.stats()).dead === 1)).toBe(true)
          const [again] = await inbox.take(10, 60_000)
          expect(again).toMatchObject({ id: kept.id, takes: 1 })
          expect((await inbox.dead()).map((letter) => letter.keys[0])).toEqual(['junk'])
          await sleep(50)
        } finally {
          process.off('unhandledRejection', record)
        }
        expect(unhandled).toEqual([])
      })

      it('Redis down: append rejects within timeoutMs and the receiver answers 503 with Retry-After; once back the resend is accepted', async () => {
        const timeoutMs = 300
        const inbox = new RedisInbox({ client: conn.client, prefix: 'down:', timeoutMs })
        const receiver = createWebhookReceiver({ secret: SECRET, inbox })
        await faulty.kill()
        const started = Date.now()
        const error = await inbox.append(inboxDelivery()).catch((e: unknown) => e)
        const elapsed = Date.now() - started
        expect(error).toMatchObject({ name: 'InboxError', kind: 'unavailable', operation: 'RedisInbox.append', message: expect.stringMatching(/RedisInbox.append got no answer within 300 ms/) })
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

    describe(`over ${name}: restarted from an RDB snapshot (no AOF)`, () => {
      let rdbServer: RedisServer
      let conn: Connection
      beforeAll(async () => {
        rdbServer = await startRedisServer()
        conn = await connect(rdbServer.url)
      })
      afterAll(async () => {
        await conn?.close()
        await rdbServer?.stop()
      })

      it('lease tokens never repeat: take, SAVE, take, kill -9, restart from the snapshot, take again; the stale holder is refused', async () => {
        const persistence = String(await conn.admin('INFO', 'persistence'))
        expect(persistence).toMatch(/^aof_enabled:0\r?$/m)
        const inbox = new RedisInbox({ client: conn.client, prefix: 'rdb:', timeoutMs: 10_000 })
        const sent = [inboxDelivery(), inboxDelivery(), inboxDelivery()]
        for (const d of sent) await inbox.append(d)
        const seen: string[] = []
        const [first] = await inbox.take(1, 60_000)
        seen.push(first!.lease)
        await conn.admin('SAVE')
        // Taken after the snapshot: the restart forgets this take, and its holder is now stale.
        const [stale] = await inbox.take(1, 60_000)
        seen.push(stale!.lease)
        await rdbServer.restart({ signal: 'SIGKILL' })
        const after = await inbox.take(10, 60_000)
        expect(after.map((entry) => entry.id).sort()).toEqual(sent.filter((d) => d.id !== first!.id).map((d) => d.id).sort())
        seen.push(...after.map((entry) => entry.lease))
        expect(new Set(seen).size).toBe(seen.length)
        const retaken = after.find((entry) => entry.id === stale!.id)!
        expect(await inbox.complete(stale!)).toBe(false)
        expect(await inbox.bury(stale!, 'Error: stale')).toBe(false)
        expect(await inbox.retry(stale!, 0, 'Error: stale')).toBe(false)
        // The current holder still holds it.
        expect(await inbox.complete(retaken)).toBe(true)
        expect(await inbox.complete(first!)).toBe(true)
      })
    })
  }
})
