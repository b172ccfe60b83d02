/**
 * History and replay on MemoryHistory, RedisHistory and PostgresHistory, each behind real HTTP
 * servers on 127.0.0.1 (Express, Fastify, Hono on @hono/node-server, node:http): every outcome is
 * recorded once per delivery, a replay runs the handler exactly once and is recorded, forged
 * requests are only counted, and a history outage never changes an answer.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { serve } from '@hono/node-server'
import Redis from 'ioredis'
import pg from 'pg'
import { createInboxWorker, MemoryInbox, type HistoryEntry, type WebhookHistory, type WebhookReceiverOptions } from 'svc-webhooks'
import { MemoryHistory, type HistoryRecord } from 'svc-webhooks/history'
import { webhooks as expressWebhooks } from 'svc-webhooks/express'
import { webhooksPlugin } from 'svc-webhooks/fastify'
import { webhooks as honoWebhooks } from 'svc-webhooks/hono'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisHistory } from 'svc-webhooks/redis'
import { PostgresHistory } from 'svc-webhooks/postgres'
import { signWebhook } from 'svc-webhooks/testing'
import { listen, type RunningServer } from '../support/servers.js'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'

const SECRET = 'svc_whsec_aGlzdG9yeS10ZXN0cy1zZWNyZXQtZG8tbm90LXVzZQ'

type Options = WebhookReceiverOptions<any>

/** Each adapter, started on 127.0.0.1 with the receiver options; returns its base URL. */
const ADAPTERS: Record<string, (options: Options) => Promise<RunningServer>> = {
  express: async (options) => {
    const app = express()
    app.post('/hook', expressWebhooks(options))
    return listen(app as never)
  },
  fastify: async (options) => {
    const app = Fastify()
    await app.register(webhooksPlugin, { path: '/hook', ...options })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() }
  },
  hono: async (options) => {
    const app = new Hono()
    app.post('/hook', honoWebhooks(options as never))
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => server.once('listening', resolve))
    const { port } = server.address() as { port: number }
    return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
  },
  node: async (options) => listen(createNodeHandler(options)),
}

async function deliver(url: string, event: object, id: string, secret = SECRET): Promise<{ status: number; body: Record<string, unknown> }> {
  const signed = await signWebhook({ secret, event, id })
  const res = await fetch(`${url}/hook`, { method: 'POST', headers: signed.headers, body: signed.body })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

const message = (text: string) => ({ event: 'message.received', message: { id: `msg_${text}`, text } })

/** The suite every engine runs; `make` gives a fresh, empty history. */
function describeHistory(engine: string, make: (options: { keepBodies?: boolean; prefix: string }) => Promise<WebhookHistory>, breakIt?: () => Promise<WebhookHistory>) {
  for (const [adapter, start] of Object.entries(ADAPTERS)) {
    describe(`${engine} behind ${adapter}`, () => {
      let history: WebhookHistory
      let server: RunningServer
      let runs: string[]
      let failing: Set<string>
      let replay: (id: string) => Promise<{ outcome: string }>
      beforeAll(async () => {
        history = await make({ keepBodies: true, prefix: `${engine}-${adapter}-${Date.now()}` })
        runs = []
        failing = new Set()
        const on = {
          'message.received': async (event: { message: { text: string } }, delivery: { id: string }) => {
            runs.push(delivery.id)
            if (failing.has(event.message.text)) throw new Error(`cannot save ${event.message.text}: svc_whsec_leakedsecretvalue`)
          },
        }
        const options: Options = { secret: SECRET, on: on as never, history, log: false }
        server = await start(options)
        // The adapter's handler carries the receiver's replay; rebuilt here the same way through the core.
        const { createWebhookReceiver } = await import('svc-webhooks')
        replay = createWebhookReceiver(options).replay
      })
      afterAll(async () => {
        await server?.close()
        await history?.close()
      })

      it('records every outcome once per delivery, with attempts and deliveries', async () => {
        const ok = `ok-${adapter}`
        expect((await deliver(server.url, message('hello'), ok)).status).toBe(200)
        failing.add('broken')
        const bad = `bad-${adapter}`
        expect((await deliver(server.url, message('broken'), bad)).status).toBe(500)
        expect((await deliver(server.url, message('hello'), ok)).body.duplicate ?? true).toBeTruthy()
        const ignored = `ign-${adapter}`
        expect((await deliver(server.url, { event: 'some.future_type' }, ignored)).status).toBe(200)
        await history.flush()

        const processed = await history.get(ok)
        expect(processed).toMatchObject({ id: ok, endpoint: 'default', outcome: 'processed', status: 200, attempts: 1, deliveries: 2, eventType: 'message.received', hasBody: true })
        expect(processed!.processedAt).toBeGreaterThan(0)
        const failed = await history.get(bad)
        expect(failed).toMatchObject({ outcome: 'failed', status: 500, code: 'handler_failed', attempts: 1, errorName: 'Error' })
        // The message is kept, sanitized: the secret-shaped part never.
        expect(failed!.errorMessage).toContain('cannot save broken')
        expect(failed!.errorMessage).not.toContain('leakedsecretvalue')
        expect(await history.get(ignored)).toMatchObject({ outcome: 'ignored', attempts: 0 })
        const page = await history.list({ limit: 50 })
        const ids = page.entries.map((e) => e.id)
        for (const id of [ok, bad, ignored]) expect(ids.filter((x) => x === id)).toHaveLength(1)
        expect(page.entries.every((e) => e.body === undefined)).toBe(true)
        expect((await history.list({ outcome: 'failed' })).entries.map((e) => e.id)).toEqual([bad])
      })

      it('replays a failed delivery once, bypassing the dedupe record, and records it', async () => {
        const bad = `bad-${adapter}`
        failing.delete('broken')
        const before = runs.length
        const result = await replay(bad)
        expect(result.outcome).toBe('processed')
        expect(runs.length - before).toBe(1)
        expect(await history.get(bad)).toMatchObject({ outcome: 'processed', replays: 1, attempts: 2, code: 'replayed' })
        expect((await history.get(bad))!.errorName).toBeUndefined()
        // A processed delivery's dedupe record holds its id; a replay runs it all the same.
        const processed = `ok-${adapter}`
        const again = runs.length
        await replay(processed)
        expect(runs.length - again).toBe(1)
        expect(await history.get(processed)).toMatchObject({ replays: 1, outcome: 'processed' })
      })
    })
  }

  describe(`${engine}: refusals and bounds`, () => {
    let history: WebhookHistory
    let server: RunningServer
    beforeAll(async () => {
      history = await make({ prefix: `${engine}-forged-${Date.now()}` })
      server = await ADAPTERS.node!({ secret: SECRET, on: { 'message.received': () => undefined }, history, log: false })
    })
    afterAll(async () => {
      await server?.close()
      await history?.close()
    })

    it('2,000 forged requests add no entries, only counts per code', async () => {
      expect((await deliver(server.url, message('real'), 'real-1')).status).toBe(200)
      await history.flush()
      const before = await history.size()
      const forger = 'svc_whsec_Zm9yZ2VyLXNlY3JldC1ub3QtdGhlLXJpZ2h0LW9uZQ'
      for (let batch = 0; batch < 20; batch++) {
        const statuses = await Promise.all(Array.from({ length: 100 }, (_, i) => deliver(server.url, message('x'), `forged-${batch}-${i}`, forger).then((r) => r.status)))
        expect(statuses.every((s) => s === 401)).toBe(true)
      }
      await history.flush()
      expect(await history.size()).toBe(before)
      expect(await history.get('forged-0-0')).toBeUndefined()
      const refusals = await history.refusals()
      const total = refusals.filter((r) => r.code === 'invalid_signature').reduce((n, r) => n + r.count, 0)
      expect(total).toBe(2000)
      for (const row of refusals) expect(row.claimedIds.length).toBeLessThanOrEqual(10)
    }, 60_000)

    it('pages through every entry once, newest first, and filters by time, endpoint and outcome', async () => {
      const at = Date.now() - 1_000_000
      // Two entries share each millisecond: the cursor must still name each one exactly once.
      for (let i = 0; i < 120; i++) history.record({ id: `page-${String(i).padStart(3, '0')}`, endpoint: i % 3 === 0 ? 'other' : 'default', at: at + Math.floor(i / 2), outcome: i % 4 === 0 ? 'failed' : 'processed', status: 200 })
      await history.flush()
      const seen: string[] = []
      let cursor: string | undefined
      for (let page = 0; page < 10; page++) {
        const got = await history.list({ limit: 50, since: at, until: at + 60, ...(cursor && { cursor }) })
        seen.push(...got.entries.map((e) => e.id))
        cursor = got.cursor
        if (!cursor) break
      }
      expect(seen.length).toBe(120)
      expect(new Set(seen).size).toBe(120)
      const times = seen.map((id) => Math.floor(Number(id.slice(5)) / 2))
      expect(times).toEqual([...times].sort((a, b) => b - a))
      const failedOther = await history.list({ endpoint: 'other', outcome: 'failed', since: at, until: at + 60, limit: 500 })
      expect(failedOther.entries.map((e) => e.id).sort()).toEqual(Array.from({ length: 120 }, (_, i) => i).filter((i) => i % 3 === 0 && i % 4 === 0).map((i) => `page-${String(i).padStart(3, '0')}`))
      const window = await history.list({ since: at + 10, until: at + 20, limit: 500 })
      expect(window.entries).toHaveLength(20)
    })

    it('a replay of a delivery whose body was not kept says so and offers the resend', async () => {
      const { createWebhookReceiver } = await import('svc-webhooks')
      const receiver = createWebhookReceiver({ secret: SECRET, on: { 'message.received': () => undefined }, history, log: false })
      await expect(receiver.replay('real-1')).rejects.toMatchObject({ name: 'ReplayError', code: 'body_not_kept', message: expect.stringContaining('resend') })
      await expect(receiver.replay('never-seen')).rejects.toMatchObject({ code: 'not_found' })
    })
  })

  if (breakIt) {
    it(`${engine}: an outage never changes an answer; it is counted`, async () => {
      const broken = await breakIt()
      const server = await ADAPTERS.express!({ secret: SECRET, on: { 'message.received': () => undefined }, history: broken, log: false })
      try {
        for (let i = 0; i < 5; i++) expect((await deliver(server.url, message('down'), `down-${i}`)).status).toBe(200)
        await broken.flush()
        expect(broken.stats().failed).toBe(5)
      } finally {
        await server.close()
        await broken.close()
      }
    }, 30_000)
  }

  it(`${engine}: the worker records accepted → retrying → processed, and replays`, async () => {
    const history = await make({ keepBodies: true, prefix: `${engine}-worker-${Date.now()}` })
    const inbox = new MemoryInbox()
    const server = await ADAPTERS.node!({ secret: SECRET, inbox, history, log: false })
    let fail = true
    let runs = 0
    const worker = createInboxWorker({
      inbox, history, log: false, firstRetryDelayMs: 20, maxRetryAgeMs: 60_000, pollIntervalMs: 10,
      on: { 'message.received': async (event) => {
        runs++
        if (fail || (event as { message: { text: string } }).message.text === 'always') throw new TypeError('downstream said no')
      } },
    })
    try {
      expect((await deliver(server.url, message('later'), 'w-1')).status).toBe(202)
      await history.flush()
      expect(await history.get('w-1')).toMatchObject({ outcome: 'accepted', status: 202, hasBody: true })
      worker.start()
      await expect.poll(async () => { await history.flush(); return (await history.get('w-1'))?.outcome }, { timeout: 5000 }).toBe('retrying')
      expect(await history.get('w-1')).toMatchObject({ errorName: 'TypeError', errorMessage: 'downstream said no', status: 202 })
      fail = false
      await expect.poll(async () => { await history.flush(); return (await history.get('w-1'))?.outcome }, { timeout: 5000 }).toBe('processed')
      const before = runs
      expect((await worker.replay('w-1')).outcome).toBe('processed')
      expect(runs - before).toBe(1)
      expect(await history.get('w-1')).toMatchObject({ replays: 1, outcome: 'processed' })
    } finally {
      await worker.stop(1000)
      await server.close()
      await history.close()
    }
  }, 20_000)
}

describeHistory('MemoryHistory', async (options) => new MemoryHistory({ keepBodies: options.keepBodies ?? false }))

describeWithRedis('RedisHistory', () => {
  let server: RedisServer
  const clients: Redis[] = []
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    for (const client of clients) client.disconnect()
    await server?.stop()
  })
  const connect = (url: string) => {
    const client = new Redis(url, { maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    clients.push(client)
    return client
  }
  describeHistory(
    'RedisHistory',
    async ({ keepBodies, prefix }) => new RedisHistory({ client: connect(server.url), prefix, keepBodies: keepBodies ?? false, log: false }),
    async () => new RedisHistory({ client: connect('redis://127.0.0.1:1'), timeoutMs: 200, log: false }),
  )
  it('a history server killed, hung and restarted mid-traffic never changes or delays an answer', async () => {
    const own = await startRedisServer()
    const client = new Redis(own.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false })
    client.on('error', () => {})
    const history = new RedisHistory({ client, timeoutMs: 300, log: false })
    const server = await ADAPTERS.express!({ secret: SECRET, on: { 'message.received': () => undefined }, history, log: false })
    const send = async (from: number) => {
      for (let i = from; i < from + 10; i++) {
        const started = Date.now()
        expect((await deliver(server.url, message('live'), `live-${i}`)).status).toBe(200)
        // The answer never waits for the history's server.
        expect(Date.now() - started).toBeLessThan(1000)
      }
      await history.flush()
    }
    try {
      await send(0)
      expect(history.stats().failed).toBe(0)
      own.pause()
      await send(10)
      own.resume()
      await own.kill()
      await send(20)
      const lost = history.stats().failed
      expect(lost).toBeGreaterThan(0)
      await own.start()
      // Bounded: ioredis reconnects within a few seconds.
      for (let i = 0; i < 100 && client.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 50))
      await send(30)
      expect(history.stats().failed).toBe(lost)
      expect(await history.get('live-35')).toMatchObject({ outcome: 'processed', deliveries: 1 })
    } finally {
      await server.close()
      client.disconnect()
      await own.stop()
    }
  }, 60_000)

  it('finds and trims entries of an endpoint named outside ASCII, bodies and id lookups with them', async () => {
    const client = connect(server.url)
    const prefix = `{non-ascii-${Date.now()}}:`
    const history = new RedisHistory({ client, prefix, maxEntries: 3, keepBodies: true, log: false })
    for (let i = 0; i < 6; i++) history.record({ id: `évt_${i}`, endpoint: 'tenänt ✓', at: Date.now() + i, outcome: 'processed', delivered: true, body: `{"n":${i}}` })
    await history.flush()
    expect(await history.get('évt_5')).toMatchObject({ id: 'évt_5', endpoint: 'tenänt ✓', hasBody: true, body: '{"n":5}' })
    expect(await history.get('évt_0')).toBeUndefined()
    expect(await history.size()).toBe(3)
    // The entries, their bodies and the index are trimmed together.
    const members = ['évt_3', 'évt_4', 'évt_5'].map((id) => `${'tenänt ✓'.length}:tenänt ✓:${id}`)
    expect((await client.hkeys(`${prefix}e`)).sort()).toEqual(members)
    expect((await client.hkeys(`${prefix}b`)).sort()).toEqual(members)
    expect((await client.zrange(`${prefix}i`, '0', '-1')).sort()).toEqual(members)
  })

  it('writes a batch whose endpoint names hold a lone surrogate, NUL, quotes and backslashes, and finds their entries', async () => {
    const history = new RedisHistory({ client: connect(server.url), prefix: `{odd-${Date.now()}}:`, log: false })
    const odd = ['lone \uD800 high', 'lone \uDC00 low', 'nul \u0000 "quoted" \\ back', 'plain']
    // What the client sends for a lone surrogate is U+FFFD's bytes: the name reads back so.
    const readBack = ['lone \uFFFD high', 'lone \uFFFD low', odd[2], odd[3]]
    for (const [i, endpoint] of odd.entries()) history.record({ id: `evt_${i}`, endpoint, at: Date.now() + i, outcome: 'processed', delivered: true })
    await history.flush()
    expect(history.stats()).toMatchObject({ recorded: odd.length, failed: 0 })
    for (const [i, endpoint] of odd.entries()) {
      const named = { id: `evt_${i}`, endpoint: readBack[i], outcome: 'processed' }
      expect(await history.get(`evt_${i}`, endpoint)).toMatchObject(named)
      expect(await history.get(`evt_${i}`)).toMatchObject(named)
      expect((await history.list({ endpoint })).entries).toEqual([expect.objectContaining(named)])
    }
  })

  it('merges records as MemoryHistory does: in one batch or several, late, soft, errors, bodies, replays', async () => {
    const memory = new MemoryHistory({ keepBodies: true })
    const redis = new RedisHistory({ client: connect(server.url), prefix: `{merge-${Date.now()}}:`, keepBodies: true, log: false })
    // A fixed pseudo-random sequence: every field of a record, for four ids on two endpoints.
    let seed = 7
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      // The high bits: an LCG's low ones repeat with a short period.
      return Math.floor(seed / 65536) % n
    }
    const outcomes = ['accepted', 'processed', 'failed', 'retrying', 'dead', 'ignored', 'duplicate'] as const
    const base = Date.now()
    for (let batch = 0; batch < 40; batch++) {
      // One to six records per batch: an id often gets several records in one batch.
      for (let i = 0, n = 1 + next(6); i < n; i++) {
        const r: HistoryRecord = { id: `m_${next(4)}`, endpoint: next(3) === 0 ? 'other' : 'default', at: base + next(1000), outcome: outcomes[next(outcomes.length)]! }
        if (next(3) === 0) r.soft = true
        if (next(2) === 0) r.eventType = `type.${next(3)}`
        if (next(2) === 0) r.status = [200, 202, 500][next(3)]
        if (next(2) === 0) r.code = ['handler_failed', 'in_flight', 'replayed'][next(3)]
        if (next(4) === 0) r.attempts = next(5)
        else if (next(2) === 0) r.addAttempt = true
        if (next(2) === 0) r.delivered = true
        if (next(3) === 0) r.processed = true
        const error = next(4)
        if (error === 0) r.error = null
        else if (error === 1) r.error = { name: 'TypeError', message: `boom "${next(9)}" ✓` }
        if (next(3) === 0) {
          r.body = `{"n":${next(100)}}`
          if (next(2) === 0) r.bodyRedacted = true
        }
        if (next(5) === 0) r.replay = true
        memory.record(r)
        redis.record(r)
      }
      await redis.flush()
    }
    for (const endpoint of ['default', 'other']) {
      for (let id = 0; id < 4; id++) expect(await redis.get(`m_${id}`, endpoint)).toEqual(await memory.get(`m_${id}`, endpoint))
    }
    // Newest first; entries received in the same millisecond come in either engine's own order.
    const listed = (await redis.list({ limit: 500 })).entries
    expect(listed.every((e, i) => i === 0 || e.receivedAt <= listed[i - 1]!.receivedAt)).toBe(true)
    const byKey = (a: HistoryEntry, b: HistoryEntry) => `${a.endpoint} ${a.id}`.localeCompare(`${b.endpoint} ${b.id}`)
    expect(listed.sort(byKey)).toEqual((await memory.list({ limit: 500 })).entries.sort(byKey))
  })

  it('get(id) without an endpoint answers the latest received entry of that id, and nothing past the retention', async () => {
    let now = Date.now()
    const history = new RedisHistory({ client: connect(server.url), prefix: `{latest-${now}}:`, retentionMs: 60_000, now: () => now, log: false })
    history.record({ id: 'x', endpoint: 'a', at: now, outcome: 'processed', delivered: true })
    history.record({ id: 'x', endpoint: 'b', at: now + 5, outcome: 'failed', delivered: true })
    await history.flush()
    // A later record of the older entry changes it, not which entry is the latest received.
    history.record({ id: 'x', endpoint: 'a', at: now + 10, outcome: 'retrying', attempts: 2 })
    await history.flush()
    expect(await history.get('x')).toMatchObject({ endpoint: 'b', outcome: 'failed' })
    expect(await history.get('x', 'a')).toMatchObject({ endpoint: 'a', outcome: 'retrying', attempts: 2, updatedAt: now + 10 })
    now += 60_011
    expect(await history.get('x')).toBeUndefined()
    expect(await history.get('x', 'b')).toBeUndefined()
    expect((await history.list()).entries).toEqual([])
  })

  it('two processes writing the same entries at once: each record counted once, the later outcome kept whatever lands first', async () => {
    const prefix = `{two-writers-${Date.now()}}:`
    const receiver = new RedisHistory({ client: connect(server.url), prefix, log: false })
    const worker = new RedisHistory({ client: connect(server.url), prefix, log: false })
    const at = Date.now()
    const ids = Array.from({ length: 300 }, (_, i) => `evt_${i}`)
    for (let round = 0; round < 3; round++) {
      // Batches of both land interleaved: the same ids, in opposite orders.
      for (const id of ids) receiver.record({ id, endpoint: 'default', at: at + round * 10, outcome: 'accepted', code: 'accepted', status: 202, delivered: true, addAttempt: true })
      for (const id of [...ids].reverse()) worker.record({ id, endpoint: 'default', at: at + round * 10 + 1, outcome: 'retrying', addAttempt: true, error: { name: 'Error', message: `round ${round}` } })
      await Promise.all([receiver.flush(), worker.flush()])
    }
    for (const id of [ids[0]!, ids[150]!, ids[299]!]) {
      expect(await receiver.get(id)).toMatchObject({ id, receivedAt: at, updatedAt: at + 21, outcome: 'retrying', deliveries: 3, attempts: 6, errorMessage: 'round 2' })
    }
    expect(await receiver.size()).toBe(300)
    expect(receiver.stats()).toMatchObject({ recorded: 900, failed: 0 })
    expect(worker.stats()).toMatchObject({ recorded: 900, failed: 0 })
  })

  it('keeps every key in one Cluster slot: the prefix gets a hash tag', () => {
    expect(new RedisHistory({ client: connect(server.url), prefix: 'app:h:' }).prefix).toBe('{app:h:}')
    expect(new RedisHistory({ client: connect(server.url) }).prefix).toBe('{svc-webhooks:history}:')
  })
})

describe('history batches (RedisHistory, PostgresHistory)', () => {
  it('records that come in while a batch is written wait for the next 20 ms, unless a whole batch (500) waits', async () => {
    vi.useFakeTimers()
    try {
      // The client is not under test: each write's record count, each answered when the test says.
      const writes: { records: number; done: () => void }[] = []
      const client = { eval: (_script: string, { arguments: args }: { arguments: string[] }) => new Promise<number>((resolve) => void writes.push({ records: Number(args[6]), done: () => resolve(1) })) }
      const history = new RedisHistory({ client: client as never, log: false })
      const record = (i: number) => history.record({ id: `evt_${i}`, endpoint: 'default', at: Date.now(), outcome: 'processed', delivered: true })
      record(0)
      await vi.advanceTimersByTimeAsync(20)
      expect(writes.map((w) => w.records)).toEqual([1])
      for (let i = 1; i <= 50; i++) record(i)
      writes[0]!.done()
      await vi.advanceTimersByTimeAsync(0)
      // Not written at once behind the first (a batch of what one round trip gathers): after the timer.
      expect(writes.map((w) => w.records)).toEqual([1])
      await vi.advanceTimersByTimeAsync(20)
      expect(writes.map((w) => w.records)).toEqual([1, 50])
      for (let i = 51; i <= 650; i++) record(i)
      writes[1]!.done()
      await vi.advanceTimersByTimeAsync(0)
      // A whole batch waiting goes at once; the rest waits for the timer again.
      expect(writes.map((w) => w.records)).toEqual([1, 50, 500])
      writes[2]!.done()
      await vi.advanceTimersByTimeAsync(0)
      expect(writes).toHaveLength(3)
      await vi.advanceTimersByTimeAsync(20)
      expect(writes.map((w) => w.records)).toEqual([1, 50, 500, 100])
      writes[3]!.done()
      await vi.advanceTimersByTimeAsync(0)
      expect(history.stats()).toMatchObject({ recorded: 651, pending: 0, failed: 0 })
    } finally {
      vi.useRealTimers()
    }
  })
})

describeWithPostgres('PostgresHistory', () => {
  let server: PostgresServer
  let pool: pg.Pool
  let n = 0
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 10 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })
  describeHistory(
    'PostgresHistory',
    async ({ keepBodies }) => {
      const history = new PostgresHistory({ pool, table: `history_${++n}`, keepBodies: keepBodies ?? false, log: false })
      await history.ensureTable()
      return history
    },
    async () => {
      const dead = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', connectionTimeoutMillis: 200 })
      dead.on('error', () => {})
      return new PostgresHistory({ pool: dead, timeoutMs: 300, log: false })
    },
  )
})
