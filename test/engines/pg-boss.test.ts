/**
 * svc-webhooks/pg-boss against a real Postgres with pg-boss's own queues and workers: the
 * producer contract (producer-contract.ts), job ids as name-based UUIDs (vectors from Python's
 * uuid.uuid5), the job row's retention, distinct deliveries accepted on every queue policy that
 * limits jobs per singleton key, a receiver over real HTTP answering 202 then 200 duplicate and
 * `boss.work` running the handler once, a failing handler retried by the queue's retryLimit then
 * in its deadLetter queue, per-job results in a batch, a worker killed after its handler
 * succeeded (the job expired and fetched again) running the handler once with a store and twice
 * without, an append rejecting while Postgres is down, the receive scope's trace context reaching
 * the handler's process scope, and (no server) the handler's startup warning for an `on` key that
 * is no event type.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import pg from 'pg'
import { PgBoss } from 'pg-boss'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver, isInboxError, type InboxWorkerResult, type VerifiedDelivery } from 'svc-webhooks'
import { createNodeHandler } from 'svc-webhooks/node'
import { PgBossInbox, createPgBossHandler, pgBossJobId, type DeliveryJobData } from 'svc-webhooks/pg-boss'
import { PostgresStore } from 'svc-webhooks/postgres'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { listen } from '../support/servers.js'
import { eventually } from '../stores/contract.js'
import { inboxDelivery } from '../inbox/contract.js'
import { describeProducerContract } from './producer-contract.js'
import { recordingTelemetry } from '../support/recording-telemetry.js'

const SECRET = 'svc_whsec_pg_boss_engine_tests'

const WORKER = new URL('../support/engine-worker.mjs', import.meta.url)
/** A delivery whose body is an event the handlers run for. */
const runnable = () => inboxDelivery({ rawBody: new TextEncoder().encode(JSON.stringify(sampleEvent('message.received'))) })

describeWithPostgres('svc-webhooks/pg-boss', () => {
  let server: PostgresServer
  let pool: pg.Pool
  let boss: PgBoss
  const working: string[] = []

  /** A queue of its own (and its dead-letter queue), with `options`. */
  async function freshQueue(options: Record<string, unknown> = {}): Promise<string> {
    const name = `q-${randomUUID()}`
    await boss.createQueue(`${name}-dead`)
    await boss.createQueue(name, { deadLetter: `${name}-dead`, ...options })
    return name
  }
  async function work(queue: string, options: Record<string, unknown>, handler: (jobs: never[]) => Promise<unknown>) {
    await boss.work(queue, { pollingIntervalSeconds: 0.5, ...options }, handler as never)
    working.push(queue)
  }
  const state = async (queue: string, id: string) => (await boss.getJobById(queue, id))?.state

  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 8 })
    pool.on('error', () => {})
    await pool.query('CREATE TABLE runs (queue text, pid int, id text)')
    await new PostgresStore({ pool }).ensureTable()
    // Expired jobs are failed (and so handed out again) by the supervisor: every second here.
    boss = new PgBoss({ connectionString: server.url, max: 8, superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 })
    boss.on('error', () => {})
    await boss.start()
  })
  afterEach(async () => {
    for (const queue of working.splice(0)) await boss.offWork(queue)
  })
  afterAll(async () => {
    await boss?.stop({ graceful: false }).catch(() => undefined)
    await pool?.end()
    await server?.stop()
  })

  it('job ids: the RFC 9562 version 5 UUID of the key (vectors from Python uuid.uuid5)', async () => {
    expect(pgBossJobId('default:evt_1')).toBe('cc400d94-ed63-505d-aa7a-8fcdb6dee08c')
    expect(pgBossJobId('tenant:é:2')).toBe('03fbffe5-8116-593d-b9b7-d5e8015efaaf')
  })

  describeProducerContract('PgBossInbox', async () => {
    const queue = await freshQueue()
    return {
      inbox: new PgBossInbox({ boss, queue }),
      storedBody: async (d) => Buffer.from(((await boss.getJobById(queue, pgBossJobId(d.keys[0]!)))!.data as DeliveryJobData).body, 'base64'),
      // As boss.work does: fetch the next job and complete it; until it is this delivery's.
      async complete(d) {
        for (let i = 0; i < 100; i++) {
          const [job] = await boss.fetch(queue)
          if (!job) throw new Error(`no job for ${d.id} to complete`)
          await boss.complete(queue, job.id)
          if (job.id === pgBossJobId(d.keys[0]!)) return
        }
      },
    }
  })

  it('append: accepted, then duplicate while it waits and after it completed; the raw bytes untouched in the job', async () => {
    const queue = await freshQueue()
    const inbox = new PgBossInbox({ boss, queue })
    const d = inboxDelivery()
    expect(await inbox.append(d)).toBe('accepted')
    expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
    const id = pgBossJobId(d.keys[0]!)
    const job = (await boss.getJobById(queue, id))!
    const data = job.data as DeliveryJobData
    expect([...Buffer.from(data.body, 'base64')]).toEqual([...d.rawBody])
    expect(data).toMatchObject({ v: 1, keys: d.keys, id: d.id })
    expect(job.deleteAfterSeconds).toBe(72 * 3600)
    const [fetched] = await boss.fetch(queue)
    await boss.complete(queue, fetched!.id)
    expect(await state(queue, id)).toBe('completed')
    expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
  })

  it("each send is a prepared statement on pg-boss's own connection; a connection that lost it sends unnamed from then on", async () => {
    // One connection, so the session the statements live in is the one the checks read.
    const single = new PgBoss({ connectionString: server.url, max: 1, supervise: false, schedule: false })
    single.on('error', () => {})
    await single.start()
    try {
      const queue = await freshQueue()
      const inbox = new PgBossInbox({ boss: single, queue })
      const db = single.getDb()
      const prepared = async () => ((await db.executeSql('SELECT name FROM pg_prepared_statements')).rows as Array<{ name: string }>).map((r) => r.name)
      const [a, b] = [inboxDelivery(), inboxDelivery()]
      expect(await inbox.append(a)).toBe('accepted')
      expect((await prepared()).filter((name) => name.startsWith('svc_'))).toHaveLength(1)
      // As a pooler in transaction mode does: the server side forgets what the client prepared.
      await db.executeSql('DEALLOCATE ALL')
      expect(await inbox.append(b)).toBe('accepted')
      expect(await inbox.append({ ...b, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.append({ ...a, receivedAt: Date.now() })).toBe('duplicate')
      expect(await prepared()).toEqual([])
      expect(await state(queue, pgBossJobId(b.keys[0]!))).toBe('created')
    } finally {
      await single.stop({ graceful: false })
    }
  })

  it.each(['short', 'singleton', 'stately', 'exclusive', 'key_strict_fifo'])('a %s queue accepts distinct deliveries side by side (the policy holds per delivery)', async (policy) => {
    const queue = await freshQueue({ policy })
    const inbox = new PgBossInbox({ boss, queue })
    const [a, b] = [inboxDelivery(), inboxDelivery()]
    expect(await inbox.append(a)).toBe('accepted')
    expect(await inbox.append(b)).toBe('accepted')
    expect(await inbox.append({ ...a, receivedAt: Date.now() })).toBe('duplicate')
    expect(await state(queue, pgBossJobId(b.keys[0]!))).toBe('created')
  })

  it('a receiver over real HTTP answers 202, then 200 duplicate; boss.work runs the handler once with the exact bytes', async () => {
    const queue = await freshQueue()
    const http = await listen(createNodeHandler({ secret: SECRET, inbox: new PgBossInbox({ boss, queue }), log: false }))
    try {
      const event = sampleEvent('message.received', { data: { text: 'héllo \u2028 "q"  \\u00e9' } } as never)
      const signed = await signWebhook({ secret: SECRET, event, id: `evt_${randomUUID()}` })
      const post = () => fetch(`${http.url}/`, { method: 'POST', headers: signed.headers, body: signed.body })
      expect((await post()).status).toBe(202)
      const second = await post()
      expect(second.status).toBe(200)
      expect(await second.text()).toMatch(/duplicate/)

      const runs: VerifiedDelivery[] = []
      const results: InboxWorkerResult[] = []
      // Typed as users write it: the handler fits boss.work's own signature.
      await boss.work(queue, { pollingIntervalSeconds: 0.5 }, createPgBossHandler({ on: { 'message.received': (_e, delivery) => void runs.push(delivery) }, log: false, onResult: (r) => void results.push(r) }))
      working.push(queue)
      const id = pgBossJobId(`default:${signed.headers['svc-webhook-id']}`)
      expect(await eventually(async () => (await state(queue, id)) === 'completed')).toBe(true)
      expect(runs).toHaveLength(1)
      expect(Buffer.from(runs[0]!.rawBody).equals(Buffer.from(signed.rawBody))).toBe(true)
      expect(results.map((r) => r.outcome)).toEqual(['processed'])
      expect((await post()).status).toBe(200)
    } finally {
      await http.close()
    }
  })

  it("trace context: the job carries the receive scope's traceparent, and the handler's process scope is started with it", async () => {
    const queue = await freshQueue()
    const { telemetry, received, processed } = recordingTelemetry()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox: new PgBossInbox({ boss, queue }), log: false, telemetry })
    const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id: `evt_${randomUUID()}` })
    expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(202)
    expect(received).toHaveLength(1)
    await work(queue, {}, createPgBossHandler({ on: { 'message.received': () => {} }, log: false, telemetry }))
    const id = pgBossJobId(`default:${signed.id}`)
    expect(await eventually(async () => (await state(queue, id)) === 'completed')).toBe(true)
    expect(processed).toEqual([{ id: signed.id, traceparent: received[0], outcome: 'processed' }])
  })

  it("a failing handler is retried by the queue's retryLimit, then moved to its deadLetter queue", async () => {
    const queue = await freshQueue({ retryLimit: 2, retryDelay: 0 })
    const d = runnable()
    await new PgBossInbox({ boss, queue }).append(d)
    let calls = 0
    await work(queue, {}, createPgBossHandler({ on: { 'message.received': () => { calls++; throw new Error('downstream is down') } }, log: false }))
    const id = pgBossJobId(d.keys[0]!)
    expect(await eventually(async () => (await state(queue, id)) === 'failed', 200)).toBe(true)
    expect(calls).toBe(3)
    const [dead] = await boss.fetch(`${queue}-dead`)
    expect((dead!.data as DeliveryJobData).id).toBe(d.id)
    expect([...Buffer.from((dead!.data as DeliveryJobData).body, 'base64')]).toEqual([...d.rawBody])
  })

  it('a handler past handlerTimeoutMs that ignores its signal: the retries meet its claim, it never runs beside itself, and the job completes once it succeeded', async () => {
    const queue = await freshQueue({ retryLimit: 10, retryDelay: 0 })
    const d = runnable()
    await new PgBossInbox({ boss, queue }).append(d)
    let started = 0
    let running = 0
    let mostAtOnce = 0
    const outcomes: string[] = []
    // No `store`: the handler's own MemoryStore holds the claim in this process.
    const handler = createPgBossHandler({
      on: {
        'message.received': async () => {
          started++
          mostAtOnce = Math.max(mostAtOnce, ++running)
          await new Promise((resolve) => setTimeout(resolve, 1200))
          running--
        },
      },
      handlerTimeoutMs: 200,
      log: false,
      onResult: (r) => void outcomes.push(r.outcome),
    })
    await work(queue, {}, handler)
    const id = pgBossJobId(d.keys[0]!)
    expect(await eventually(async () => (await state(queue, id)) === 'completed', 200)).toBe(true)
    expect({ started, mostAtOnce }).toEqual({ started: 1, mostAtOnce: 1 })
    expect(outcomes[0]).toBe('retrying')
    expect(outcomes.at(-1)).toBe('duplicate')
    expect(outcomes.slice(1, -1).every((o) => o === 'in_flight')).toBe(true)
  })

  it('perJobResults: a batch settles each job on its own; a job that is not a delivery goes to the dead letters at once', async () => {
    const queue = await freshQueue({ retryLimit: 3, retryDelay: 60 })
    const ok = runnable()
    const failing = runnable()
    const inbox = new PgBossInbox({ boss, queue })
    await inbox.append(ok)
    await inbox.append(failing)
    const foreign = (await boss.send(queue, { hello: 'world' }))!
    const calls: string[] = []
    const handler = createPgBossHandler({
      on: { 'message.received': (_e, delivery) => { calls.push(delivery.id); if (delivery.id === failing.id) throw new Error('no') } },
      perJobResults: true,
      log: false,
    })
    await boss.work(queue, { pollingIntervalSeconds: 0.5, batchSize: 3, perJobResults: true }, handler)
    working.push(queue)
    const okId = pgBossJobId(ok.keys[0]!)
    const failingId = pgBossJobId(failing.keys[0]!)
    expect(await eventually(async () => (await state(queue, okId)) === 'completed' && (await state(queue, foreign)) === 'failed')).toBe(true)
    expect(await state(queue, failingId)).toBe('retry')
    expect(calls.sort()).toEqual([ok.id, failing.id].sort())
    const [dead] = await boss.fetch(`${queue}-dead`)
    expect(dead!.data).toEqual({ hello: 'world' })
  })

  describe('a worker killed after its handler succeeded, before pg-boss heard of it', () => {
    const children: ChildProcess[] = []
    afterEach(() => {
      for (const child of children.splice(0)) child.kill('SIGKILL')
    })

    async function killedThenFetchedAgain(withStore: boolean) {
      // Expiry: how long pg-boss lets a job stay active before it fails it (and retries it).
      const queue = await freshQueue({ expireInSeconds: 2, retryLimit: 3, retryDelay: 0 })
      const d = runnable()
      await new PgBossInbox({ boss, queue }).append(d)
      const child = spawn(process.execPath, [WORKER.pathname, 'pg-boss', server.url, queue, withStore ? 'store' : 'no-store'], { stdio: ['ignore', 'pipe', 'inherit'] })
      children.push(child)
      const exited = once(child, 'exit')
      await once(createInterface({ input: child.stdout! }), 'line')
      const [, signal] = await exited
      expect(signal).toBe('SIGKILL')
      const outcomes: string[] = []
      await work(
        queue,
        {},
        createPgBossHandler({
          on: { 'message.received': async (_e, delivery) => void (await pool.query('INSERT INTO runs (queue, pid, id) VALUES ($1, $2, $3)', [queue, process.pid, delivery.id])) },
          ...(withStore && { store: new PostgresStore({ pool }) }),
          log: false,
          onResult: (r) => void outcomes.push(r.outcome),
        }),
      )
      const id = pgBossJobId(d.keys[0]!)
      expect(await eventually(async () => (await state(queue, id)) === 'completed', 400)).toBe(true)
      const runs = (await pool.query('SELECT pid FROM runs WHERE queue = $1', [queue])).rows.map((r) => r.pid as number)
      return { runs, outcomes, child: child.pid }
    }

    it('with a store: the job is completed without running the handler again', async () => {
      const { runs, outcomes, child } = await killedThenFetchedAgain(true)
      expect(runs).toEqual([child])
      expect(outcomes).toEqual(['duplicate'])
    })

    it('without one: the handler runs a second time (what the store is for)', async () => {
      const { runs, outcomes } = await killedThenFetchedAgain(false)
      expect(runs).toHaveLength(2)
      expect(outcomes).toEqual(['processed'])
    })
  })

  it('refuses a missing boss or queue and non-positive numbers at construction', () => {
    expect(() => new PgBossInbox({ queue: 'q' } as never)).toThrow(TypeError)
    expect(() => new PgBossInbox({ boss, queue: '' })).toThrow(TypeError)
    expect(() => new PgBossInbox({ boss, queue: 'q', retentionMs: -1 })).toThrow(TypeError)
    expect(() => new PgBossInbox({ boss, queue: 'q', timeoutMs: 0 })).toThrow(TypeError)
    expect(() => createPgBossHandler({} as never)).toThrow(/`on`/)
    expect(() => createPgBossHandler({ on: {}, handlerTimeoutMs: 0 })).toThrow(TypeError)
  })

  // Last: it stops the server.
  it('Postgres down: append rejects with an unavailable InboxError within timeoutMs; accepted again once it is back', async () => {
    const queue = await freshQueue()
    const inbox = new PgBossInbox({ boss, queue, timeoutMs: 300 })
    expect(await inbox.append(inboxDelivery())).toBe('accepted')
    await server.kill()
    try {
      const error = await inbox.append(inboxDelivery()).catch((e: unknown) => e)
      expect(isInboxError(error)).toBe(true)
      expect(error).toMatchObject({ kind: 'unavailable', operation: 'PgBossInbox.append' })
    } finally {
      await server.start()
    }
    const d = inboxDelivery()
    expect(await eventually(async () => (await inbox.append(d).catch(() => 'down')) !== 'down', 200)).toBe(true)
    expect(await inbox.append(d)).toBe('duplicate')
  })
})

describe('createPgBossHandler startup warnings (no server)', () => {
  it('warns once, at creation, about an `on` key that is no event type; a valid `on` writes nothing', () => {
    const lines: string[] = []
    createPgBossHandler({ on: { 'message.recieved': () => {} } as never, log: (line) => void lines.push(line) })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain('"message.recieved"')
    expect(lines[0]).toContain('Did you mean "message.received"?')
    const quiet: string[] = []
    createPgBossHandler({ on: { 'message.received': () => {} }, log: (line) => void quiet.push(line) })
    expect(quiet).toEqual([])
  })
})
