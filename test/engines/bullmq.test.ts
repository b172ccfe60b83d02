/**
 * svc-webhooks/bullmq against a real redis-server on 127.0.0.1 with BullMQ's own Queue and
 * Worker: the producer contract (producer-contract.ts), the job id from the dedupe key and the
 * options on each job, a queue-wide deduplication id ignored, a receiver over real HTTP answering
 * 202 then 200 duplicate and the Worker running the handler once with the exact bytes, a failing
 * handler retried by the job's attempts then in the failed set, a job that is not a delivery
 * failed at once, an id another run holds delayed without spending an attempt, a worker killed
 * after its handler succeeded (the job taken back by the stalled check) running the handler once
 * with a store and twice without, an append rejecting while Redis is down, the receive scope's
 * trace context reaching the processor's process scope, and (no server) the processor's startup
 * warning for an `on` key that is no event type.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { Queue, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver, isInboxError, type InboxDelivery, type InboxWorkerResult, type VerifiedDelivery } from 'svc-webhooks'
import { BullMQInbox, bullmqJobId, createBullMQProcessor, type DeliveryJobData } from 'svc-webhooks/bullmq'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisStore } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { listen } from '../support/servers.js'
import { eventually } from '../stores/contract.js'
import { inboxDelivery } from '../inbox/contract.js'
import { describeProducerContract } from './producer-contract.js'
import { recordingTelemetry } from '../support/recording-telemetry.js'

const SECRET = 'svc_whsec_bullmq_engine_tests'

const WORKER = new URL('../support/engine-worker.mjs', import.meta.url)

describeWithRedis('svc-webhooks/bullmq', () => {
  let server: RedisServer
  let client: Redis
  const closing: Array<() => Promise<unknown>> = []
  /** A Queue of its own name, closed after the test. */
  function freshQueue(defaultJobOptions?: Record<string, unknown>): Queue {
    const queue = new Queue(`q-${randomUUID()}`, { connection: { url: server.url }, ...(defaultJobOptions && { defaultJobOptions }) })
    closing.push(() => queue.close())
    return queue
  }
  /** A Worker running `processor` on `queue`, closed after the test. */
  function worker(queue: Queue, processor: ReturnType<typeof createBullMQProcessor>, options: Record<string, unknown> = {}): Worker {
    const w = new Worker(queue.name, processor, { connection: { url: server.url }, ...options })
    w.on('error', () => {})
    closing.push(() => w.close(true))
    return w
  }

  beforeAll(async () => {
    server = await startRedisServer()
    client = new Redis(server.url)
  })
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined)
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })

  /** The contract's view of a queue's jobs: a stored body, and completing a delivery's job. */
  function jobsOf(queue: Queue) {
    return {
      storedBody: async (d: InboxDelivery) => Buffer.from(((await queue.getJob(bullmqJobId(d.keys[0]!)))!.data as DeliveryJobData).body, 'base64'),
      // As a Worker does: take the next job under a lock token, complete it; until it is this delivery's.
      async complete(d: InboxDelivery) {
        const taker = new Worker(queue.name, null, { connection: { url: server.url } })
        try {
          for (let i = 0; i < 100; i++) {
            const job = await taker.getNextJob('contract-token')
            if (!job) throw new Error(`no job for ${d.id} to complete`)
            await job.moveToCompleted('done', 'contract-token', false)
            if (job.id === bullmqJobId(d.keys[0]!)) return
          }
        } finally {
          await taker.close()
        }
      },
    }
  }

  describeProducerContract('BullMQInbox', async () => {
    const queue = freshQueue()
    return {
      inbox: new BullMQInbox({ queue }),
      ...jobsOf(queue),
    }
  })

  // A queue offering only Queue.add, getJob and getJobData (another BullMQ, or BullMQ telemetry on):
  // the add, then the job read back.
  describeProducerContract('BullMQInbox, add and read-back', async () => {
    const queue = freshQueue()
    const plain = { name: queue.name, add: queue.add.bind(queue), getJob: queue.getJob.bind(queue), backend: { getJobData: (id: string) => queue.backend.getJobData(id) } }
    return {
      inbox: new BullMQInbox({ queue: plain }),
      ...jobsOf(queue),
    }
  })

  // ioredis' auto-pipelining sends MULTI at once and queues the rest: the add and read-back path.
  describeProducerContract('BullMQInbox over a connection with enableAutoPipelining', async () => {
    const queue = new Queue(`q-${randomUUID()}`, { connection: { url: server.url, enableAutoPipelining: true } as never })
    closing.push(() => queue.close())
    return {
      inbox: new BullMQInbox({ queue }),
      ...jobsOf(queue),
    }
  })

  it('over an auto-pipelining connection, ten distinct deliveries at once are each accepted', async () => {
    const queue = new Queue(`q-${randomUUID()}`, { connection: { url: server.url, enableAutoPipelining: true } as never })
    closing.push(() => queue.close())
    const inbox = new BullMQInbox({ queue })
    const results = await Promise.all(Array.from({ length: 10 }, () => inbox.append(inboxDelivery())))
    expect(results).toEqual(Array.from({ length: 10 }, () => 'accepted'))
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 10 })
  })

  it('append is one Redis transaction: MULTI, EXISTS of the job, the add script, EXEC; nothing read back', async () => {
    const queue = freshQueue()
    const inbox = new BullMQInbox({ queue })
    await inbox.append(inboxDelivery()) // the connection is up and the script loaded
    const monitor = await client.duplicate().monitor()
    const commands: string[] = []
    // Commands a script runs are shown too, from source "lua": only the client's own are counted.
    monitor.on('monitor', (_time: string, args: string[], source: string) => void (source !== 'lua' && commands.push(String(args[0]).toLowerCase())))
    try {
      const d = inboxDelivery()
      expect(await inbox.append(d)).toBe('accepted')
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      await client.ping() // MONITOR shows commands in order: this one comes after both appends
      expect(await eventually(async () => commands.includes('ping'))).toBe(true)
    } finally {
      monitor.disconnect()
    }
    const appends = commands.slice(0, commands.indexOf('ping'))
    expect(appends.filter((c) => !['multi', 'exists', 'evalsha', 'eval', 'exec'].includes(c))).toEqual([])
    expect(appends.filter((c) => c === 'multi')).toHaveLength(2)
    expect(appends.filter((c) => c === 'exec')).toHaveLength(2)
  })

  it('Redis lost its scripts (SCRIPT FLUSH): the add loads it again and is accepted, once', async () => {
    const queue = freshQueue()
    const inbox = new BullMQInbox({ queue })
    expect(await inbox.append(inboxDelivery())).toBe('accepted')
    await client.script('FLUSH')
    const d = inboxDelivery()
    expect(await inbox.append(d)).toBe('accepted')
    expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 2 })
  })

  it('append: accepted, then duplicate for the same key; the job id is the key, the raw bytes untouched in the job', async () => {
    const queue = freshQueue()
    const inbox = new BullMQInbox({ queue })
    const d = inboxDelivery({ keys: ['ten%ant:evt:1'] })
    expect(await inbox.append(d)).toBe('accepted')
    expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
    expect(await inbox.append(inboxDelivery({ keys: ['ten%ant:evt:2'] }))).toBe('accepted')
    // `%` and `:` encoded, so a key that would collide once either is dropped stays distinct.
    expect(bullmqJobId('ten%ant:evt:1')).toBe('ten%25ant%3Aevt%3A1')
    expect(await inbox.append(inboxDelivery({ keys: ['ten%25ant%3Aevt%3A1'] }))).toBe('accepted')
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 3 })
    const job = (await queue.getJob(bullmqJobId('ten%ant:evt:1')))!
    const data = job.data as DeliveryJobData
    expect([...Buffer.from(data.body, 'base64')]).toEqual([...d.rawBody])
    expect(data).toMatchObject({ v: 1, keys: d.keys, endpoint: d.endpoint, id: d.id, signatureVersion: 'v2' })
    // Retention and retries ride on each job.
    expect(job.opts).toMatchObject({ removeOnComplete: { age: 72 * 3600 }, attempts: 18, backoff: { type: 'exponential', delay: 1000 } })
  })

  it("a queue's own attempts win over the defaults; jobOptions over both", async () => {
    const queue = freshQueue({ attempts: 4 })
    await new BullMQInbox({ queue }).append(inboxDelivery({ keys: ['t:a'] }))
    expect((await queue.getJob(bullmqJobId('t:a')))!.opts.attempts).toBe(4)
    await new BullMQInbox({ queue, jobOptions: { attempts: 7, priority: 3 }, retentionMs: 60_000 }).append(inboxDelivery({ keys: ['t:b'] }))
    expect((await queue.getJob(bullmqJobId('t:b')))!.opts).toMatchObject({ attempts: 7, priority: 3, removeOnComplete: { age: 60 } })
  })

  it("a queue-wide deduplication id (defaultJobOptions) does not turn distinct deliveries into duplicates", async () => {
    const queue = freshQueue({ deduplication: { id: 'everything' } })
    const inbox = new BullMQInbox({ queue })
    expect(await inbox.append(inboxDelivery({ keys: ['t:x'] }))).toBe('accepted')
    expect(await inbox.append(inboxDelivery({ keys: ['t:y'] }))).toBe('accepted')
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 2 })
  })

  it('a receiver over real HTTP answers 202, then 200 duplicate; the Worker runs the handler once with the exact bytes', async () => {
    const queue = freshQueue()
    const handler = createNodeHandler({ secret: SECRET, inbox: new BullMQInbox({ queue }), log: false })
    const http = await listen(handler)
    closing.push(() => http.close())
    // Non-ASCII text, escapes and spacing: bytes a re-serialisation would change.
    const event = sampleEvent('message.received', { data: { text: 'héllo \u2028 "q"  \\u00e9' } } as never)
    const signed = await signWebhook({ secret: SECRET, event, id: `evt_${randomUUID()}` })
    const post = () => fetch(`${http.url}/`, { method: 'POST', headers: signed.headers, body: signed.body })
    const first = await post()
    expect(first.status).toBe(202)
    const second = await post()
    expect(second.status).toBe(200)
    expect(await second.text()).toMatch(/duplicate/)

    const runs: VerifiedDelivery[] = []
    const results: InboxWorkerResult[] = []
    worker(queue, createBullMQProcessor({ on: { 'message.received': (_e, delivery) => void runs.push(delivery) }, log: false, onResult: (r) => void results.push(r) }))
    expect(await eventually(async () => (await queue.getJobCounts('completed')).completed === 1)).toBe(true)
    expect(runs).toHaveLength(1)
    expect(runs[0]!.id).toBe(signed.headers['svc-webhook-id'])
    expect(Buffer.from(runs[0]!.rawBody).equals(Buffer.from(signed.rawBody))).toBe(true)
    expect(results.map((r) => r.outcome)).toEqual(['processed'])
    // Completed, and still known: a resend is a duplicate.
    expect((await post()).status).toBe(200)
  })

  it("trace context: the job carries the receive scope's traceparent, and the processor's process scope is started with it", async () => {
    const queue = freshQueue()
    const { telemetry, received, processed } = recordingTelemetry()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox: new BullMQInbox({ queue }), log: false, telemetry })
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id: `evt_${randomUUID()}` })
    expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(202)
    expect(received).toHaveLength(1)
    worker(queue, createBullMQProcessor({ on: { 'message.received': () => {} }, log: false, telemetry }))
    expect(await eventually(async () => (await queue.getJobCounts('completed')).completed === 1)).toBe(true)
    expect(processed).toEqual([{ id: signed.id, traceparent: received[0], outcome: 'processed' }])
  })

  it("a failing handler is retried by the job's attempts and backoff, then lands in the failed set", async () => {
    const queue = freshQueue()
    const inbox = new BullMQInbox({ queue, jobOptions: { attempts: 3, backoff: { type: 'fixed', delay: 20 } } })
    const d = inboxDelivery({ rawBody: new TextEncoder().encode(JSON.stringify(sampleEvent('message.received'))) })
    await inbox.append(d)
    let calls = 0
    const lines: string[] = []
    worker(queue, createBullMQProcessor({ on: { 'message.received': () => { calls++; throw new Error('downstream is down') } }, log: (line) => lines.push(line) }))
    expect(await eventually(async () => (await queue.getJobCounts('failed')).failed === 1)).toBe(true)
    const job = (await queue.getJob(bullmqJobId(d.keys[0]!)))!
    expect(calls).toBe(3)
    expect(job.attemptsMade).toBe(3)
    expect(job.failedReason).toBe('downstream is down')
    expect(lines.some((line) => /failed its last of 3 attempt\(s\)/.test(line))).toBe(true)
    // The dead letter is retried from the failed set once the cause is fixed.
  })

  it('a job that is not a delivery is failed at once (UnrecoverableError), not retried', async () => {
    const queue = freshQueue()
    await queue.add('other', { hello: 'world' }, { attempts: 5 })
    worker(queue, createBullMQProcessor({ on: { 'message.received': () => {} }, log: false }))
    expect(await eventually(async () => (await queue.getJobCounts('failed')).failed === 1)).toBe(true)
    const [job] = await queue.getFailed()
    expect(job!.attemptsMade).toBe(1)
    expect(job!.failedReason).toMatch(/not a delivery BullMQInbox stored/)
  })

  it('an id another run holds in the store: the job is delayed without spending an attempt, and runs once the claim is gone', async () => {
    const queue = freshQueue()
    const store = new RedisStore({ client, prefix: `held-${randomUUID()}:` })
    const d = inboxDelivery({ rawBody: new TextEncoder().encode(JSON.stringify(sampleEvent('message.received'))) })
    const key = `%processed:${d.keys[0]}`
    expect(await store.claim(key, 'another-run', 60_000)).toBe('claimed')
    await new BullMQInbox({ queue }).append(d)
    let calls = 0
    const outcomes: string[] = []
    worker(queue, createBullMQProcessor({ on: { 'message.received': () => void calls++ }, store, log: false, onResult: (r) => void outcomes.push(r.outcome) }))
    expect(await eventually(async () => (await queue.getJobCounts('delayed')).delayed === 1)).toBe(true)
    const job = (await queue.getJob(bullmqJobId(d.keys[0]!)))!
    expect(job.attemptsMade).toBe(0)
    expect(calls).toBe(0)
    expect(outcomes).toEqual(['in_flight'])
    await store.release(key, 'another-run')
    await job.promote()
    expect(await eventually(async () => (await queue.getJobCounts('completed')).completed === 1)).toBe(true)
    expect(calls).toBe(1)
    expect(outcomes).toEqual(['in_flight', 'processed'])
  })

  it('a handler past handlerTimeoutMs that ignores its signal: the retry meets its claim (delayed, no attempt spent), never runs beside it, and completes as a duplicate once it succeeded', async () => {
    const queue = freshQueue()
    const d = inboxDelivery({ rawBody: new TextEncoder().encode(JSON.stringify(sampleEvent('message.received'))) })
    await new BullMQInbox({ queue, jobOptions: { attempts: 5, backoff: { type: 'fixed', delay: 20 } } }).append(d)
    let started = 0
    let running = 0
    let mostAtOnce = 0
    const outcomes: string[] = []
    // No `store`: the processor's own MemoryStore holds the claim in this process.
    const processor = createBullMQProcessor({
      on: {
        'message.received': async () => {
          started++
          mostAtOnce = Math.max(mostAtOnce, ++running)
          await new Promise((resolve) => setTimeout(resolve, 500))
          running--
        },
      },
      handlerTimeoutMs: 200,
      log: false,
      onResult: (r) => void outcomes.push(r.outcome),
    })
    worker(queue, processor)
    expect(await eventually(async () => outcomes.includes('in_flight') && (await queue.getJobCounts('delayed')).delayed === 1)).toBe(true)
    expect(await eventually(async () => running === 0 && started === 1)).toBe(true)
    // The claim's lease is a minute past the deadline; the abandoned run has settled, so look now.
    await (await queue.getJob(bullmqJobId(d.keys[0]!)))!.promote()
    expect(await eventually(async () => (await queue.getJobCounts('completed')).completed === 1)).toBe(true)
    expect({ started, mostAtOnce }).toEqual({ started: 1, mostAtOnce: 1 })
    expect(outcomes).toEqual(['retrying', 'in_flight', 'duplicate'])
  })

  describe('a worker killed after its handler succeeded, before BullMQ heard of it', () => {
    const children: ChildProcess[] = []
    afterEach(() => {
      for (const child of children.splice(0)) child.kill('SIGKILL')
    })

    async function killedThenTakenOver(withStore: boolean) {
      const queue = freshQueue()
      const store = new RedisStore({ client })
      const d = inboxDelivery({ rawBody: new TextEncoder().encode(JSON.stringify(sampleEvent('message.received'))) })
      await new BullMQInbox({ queue }).append(d)
      const child = spawn(process.execPath, [WORKER.pathname, 'bullmq', server.url, queue.name, withStore ? 'store' : 'no-store'], { stdio: ['ignore', 'pipe', 'inherit'] })
      children.push(child)
      const exited = once(child, 'exit')
      await once(createInterface({ input: child.stdout! }), 'line')
      const [, signal] = await exited
      expect(signal).toBe('SIGKILL')
      // The job is still active under the dead worker's lock; this worker's stalled check takes it back.
      const outcomes: string[] = []
      worker(
        queue,
        createBullMQProcessor({
          on: { 'message.received': async (_e, delivery) => void (await client.rpush(`runs:${queue.name}`, `${process.pid} ${delivery.id}`)) },
          ...(withStore && { store }),
          log: false,
          onResult: (r) => void outcomes.push(r.outcome),
        }),
        { lockDuration: 1000, stalledInterval: 500 },
      )
      expect(await eventually(async () => (await queue.getJobCounts('completed')).completed === 1, 400)).toBe(true)
      return { runs: await client.lrange(`runs:${queue.name}`, 0, -1), outcomes, child: child.pid }
    }

    it('with a store: the job is completed without running the handler again', async () => {
      const { runs, outcomes, child } = await killedThenTakenOver(true)
      expect(runs).toEqual([expect.stringMatching(new RegExp(`^${child} `))])
      expect(outcomes).toEqual(['duplicate'])
    })

    it('without one: the handler runs a second time (what the store is for)', async () => {
      const { runs, outcomes } = await killedThenTakenOver(false)
      expect(runs).toHaveLength(2)
      expect(outcomes).toEqual(['processed'])
    })
  })

  it('Redis down: append rejects with an unavailable InboxError within timeoutMs; accepted again once it is back', async () => {
    const own = await startRedisServer()
    const queue = new Queue(`q-${randomUUID()}`, { connection: { url: own.url, enableOfflineQueue: false } })
    queue.on('error', () => {})
    try {
      const inbox = new BullMQInbox({ queue, timeoutMs: 300 })
      expect(await inbox.append(inboxDelivery())).toBe('accepted')
      await own.kill()
      const error = await inbox.append(inboxDelivery()).catch((e: unknown) => e)
      expect(isInboxError(error)).toBe(true)
      expect(error).toMatchObject({ kind: 'unavailable', operation: 'BullMQInbox.append' })
      await own.start()
      const d = inboxDelivery()
      expect(await eventually(async () => (await inbox.append(d).catch(() => 'down')) !== 'down', 200)).toBe(true)
      expect(await inbox.append(d)).toBe('duplicate')
    } finally {
      await queue.close().catch(() => undefined)
      await own.stop()
    }
  })

  it('refuses a missing queue and non-positive numbers at construction', () => {
    expect(() => new BullMQInbox({} as never)).toThrow(TypeError)
    expect(() => new BullMQInbox({ queue: freshQueue(), retentionMs: 0 })).toThrow(TypeError)
    expect(() => new BullMQInbox({ queue: freshQueue(), timeoutMs: -1 })).toThrow(TypeError)
    expect(() => createBullMQProcessor({} as never)).toThrow(/`on`/)
    expect(() => createBullMQProcessor({ on: {}, handlerTimeoutMs: 0 })).toThrow(TypeError)
    expect(() => createBullMQProcessor({ on: {}, store: {} as never })).toThrow(/IdempotencyStore/)
  })
})



describe('createBullMQProcessor startup warnings (no server)', () => {
  it('warns once, at creation, about an `on` key that is no event type; a valid `on` writes nothing', () => {
    const lines: string[] = []
    createBullMQProcessor({ on: { 'message.recieved': () => {} } as never, log: (line) => void lines.push(line) })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain('"message.recieved"')
    expect(lines[0]).toContain('Did you mean "message.received"?')
    const quiet: string[] = []
    createBullMQProcessor({ on: { 'message.received': () => {} }, log: (line) => void quiet.push(line) })
    expect(quiet).toEqual([])
  })
})
