/**
 * The durable inbox end to end on MemoryInbox: the receiver appends (202, 200 duplicate, 503 when
 * the inbox is down) and never runs a handler in the request; createInboxWorker runs each
 * delivery once, retries failures with backoff, buries what exhausts them, hands a crashed
 * worker's delivery to another after its lease, and stops gracefully.
 */
import { describe, expect, it } from 'vitest'
import {
  createInboxWorker,
  createWebhookReceiver,
  MemoryInbox,
  MemoryStore,
  type InboxWorkerResult,
  type WebhookInbox,
  type WebhookResponse,
} from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_InboxWorkerTestSecret'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function delivery(id: string, text = 'hello') {
  const event = sampleEvent('message.received')
  event.message.text = text
  const signed = await signWebhook({ secret: SECRET, event, id })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers }
}

const json = (answer: WebhookResponse) => JSON.parse(answer.body) as Record<string, unknown>

/** Waits (bounded) until `done()` holds. */
async function until(done: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await sleep(20)
  }
}

describe('the receiver with an inbox', () => {
  it('202 accepted once appended, 200 duplicate for the same id, and no handler runs in the request', async () => {
    const inbox = new MemoryInbox()
    const runs: string[] = []
    const receiver = createWebhookReceiver({ secret: SECRET, inbox, on: { 'message.received': (_e, d) => void runs.push(d.id) } })
    const first = await receiver.handle(await delivery('evt-1'))
    expect(first.status).toBe(202)
    expect(json(first)).toEqual({ ok: true, accepted: true })
    const again = await receiver.handle(await delivery('evt-1'))
    expect(again.status).toBe(200)
    expect(json(again)).toEqual({ ok: true, duplicate: true })
    expect(runs).toEqual([])
    expect((await inbox.stats()).depth).toBe(1)
  })

  it('without `on`, every verified delivery is appended; with `on`, a type with no handler is 200 ignored', async () => {
    const inbox = new MemoryInbox()
    const all = createWebhookReceiver({ secret: SECRET, inbox })
    expect((await all.handle(await delivery('evt-any'))).status).toBe(202)
    const some = createWebhookReceiver({ secret: SECRET, inbox, on: {} })
    expect(json(await some.handle(await delivery('evt-none')))).toEqual({ ok: true, ignored: true })
    expect((await inbox.stats()).depth).toBe(1)
  })

  it('an inbox that rejects: 503 inbox_unavailable with Retry-After', async () => {
    const down = new MemoryInbox()
    down.append = async () => {
      throw new Error('ECONNREFUSED')
    }
    const receiver = createWebhookReceiver({ secret: SECRET, inbox: down, retryAfterSeconds: 2 })
    const answer = await receiver.handle(await delivery('evt-down'))
    expect(answer.status).toBe(503)
    expect(answer.headers['retry-after']).toBe('2')
    expect(json(answer)).toEqual({ ok: false, code: 'inbox_unavailable' })
  })

  it('a failing handler never reaches the sender: 40 deliveries while the "database" is down are all 202', async () => {
    const inbox = new MemoryInbox()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox })
    const statuses = []
    for (let i = 0; i < 40; i++) statuses.push((await receiver.handle(await delivery(`evt-outage-${i}`))).status)
    expect(new Set(statuses)).toEqual(new Set([202]))
  })
})

describe('createInboxWorker', () => {
  function worker(inbox: WebhookInbox, behaviour: (text: string, id: string) => unknown, options: Partial<Parameters<typeof createInboxWorker>[0]> = {}) {
    const runs: string[] = []
    const results: InboxWorkerResult[] = []
    const w = createInboxWorker({
      inbox,
      pollIntervalMs: 10,
      firstRetryDelayMs: 20,
      onResult: (result) => results.push(result),
      on: {
        'message.received': async (event, d) => {
          await behaviour(event.message.text, d.id)
          runs.push(d.id)
        },
      },
      ...options,
    })
    return { w, runs, results }
  }

  it('runs each accepted delivery once with (event, delivery), raw bytes untouched', async () => {
    const inbox = new MemoryInbox()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox })
    const sent = await delivery('evt-raw')
    await receiver.handle(sent)
    for (let i = 0; i < 20; i++) await receiver.handle(await delivery(`evt-${i}`))
    let raw: Uint8Array | undefined
    const { w, runs } = worker(inbox, () => {})
    w.start()
    await until(() => runs.length === 21)
    await w.stop()
    expect(new Set(runs).size).toBe(21)
    const check = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox: check }).handle(sent)
    const rawWorker = createInboxWorker({ inbox: check, pollIntervalMs: 10, on: { 'message.received': (_e, d) => void (raw = d.rawBody) } })
    rawWorker.start()
    await until(() => raw !== undefined)
    await rawWorker.stop()
    expect(Buffer.from(raw!).equals(Buffer.from(sent.body))).toBe(true)
  })

  it('a failing handler is retried with exponential backoff until it succeeds; the sender saw only 202', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-flaky'))
    let attempts = 0
    const { w, runs, results } = worker(inbox, () => {
      if (++attempts <= 3) throw new Error('database down')
    })
    w.start()
    await until(() => runs.length === 1)
    await w.stop()
    expect(attempts).toBe(4)
    expect(results.map((r) => [r.outcome, r.retryInMs])).toEqual([
      ['retrying', 20],
      ['retrying', 40],
      ['retrying', 80],
      ['processed', undefined],
    ])
    expect(await inbox.stats()).toMatchObject({ depth: 0, retrying: 0 })
  })

  it('a delivery past maxRetryAgeMs goes to the dead letters with its last error, and can be requeued', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-doomed'))
    let failing = true
    const { w, runs, results } = worker(
      inbox,
      () => {
        if (failing) throw new Error('always fails')
      },
      { maxRetryAgeMs: 100 },
    )
    w.start()
    await until(() => results.some((r) => r.outcome === 'dead'))
    const dead = await inbox.dead()
    expect(dead).toHaveLength(1)
    expect(dead[0]).toMatchObject({ id: 'evt-doomed', lastError: 'Error: always fails' })
    expect(await inbox.stats()).toMatchObject({ dead: 1, depth: 0 })
    failing = false
    expect(await inbox.requeue(dead[0]!.keys[0]!)).toBe(true)
    await until(() => runs.length === 1)
    await w.stop()
    expect(await inbox.stats()).toMatchObject({ dead: 0, depth: 0 })
  })

  it('a crashed worker\'s delivery is taken over after the visibility timeout and runs once', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-orphan'))
    // A worker that took it and died: the lease is never renewed or released.
    expect(await inbox.take(1, 200)).toHaveLength(1)
    const { w, runs } = worker(inbox, () => {})
    w.start()
    await until(() => runs.length === 1)
    await w.stop()
    expect(runs).toEqual(['evt-orphan'])
  })

  it('a handler slower than the visibility timeout keeps its lease and is not run twice by other workers', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-slow'))
    const runs: string[] = []
    const workers = Array.from({ length: 3 }, () =>
      createInboxWorker({
        inbox,
        pollIntervalMs: 10,
        visibilityTimeoutMs: 90,
        on: { 'message.received': async (_e, d) => (await sleep(400), void runs.push(d.id)) },
      }),
    )
    for (const x of workers) x.start()
    await until(() => runs.length === 1)
    await sleep(200)
    await Promise.all(workers.map((x) => x.stop()))
    expect(runs).toEqual(['evt-slow'])
  })

  it('unknown event types are completed without a handler (ignored)', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-unknown'))
    const results: InboxWorkerResult[] = []
    const w = createInboxWorker({ inbox, on: {}, pollIntervalMs: 10, onResult: (r) => results.push(r) })
    w.start()
    await until(() => results.length === 1)
    await w.stop()
    expect(results[0]).toMatchObject({ outcome: 'ignored', id: 'evt-unknown' })
    expect((await inbox.stats()).depth).toBe(0)
  })

  it('stop() waits for the handlers it runs, and takes nothing after', async () => {
    const inbox = new MemoryInbox()
    const receiver = createWebhookReceiver({ secret: SECRET, inbox })
    await receiver.handle(await delivery('evt-stop-1'))
    const { w, runs } = worker(inbox, () => sleep(150))
    w.start()
    await until(() => w.active === 1)
    await w.stop()
    expect(runs).toEqual(['evt-stop-1'])
    await receiver.handle(await delivery('evt-stop-2'))
    await sleep(100)
    expect(runs).toEqual(['evt-stop-1'])
  })

  it('with a store, a delivery handed out twice (an at-least-once engine) runs once', async () => {
    const inbox = new MemoryInbox()
    await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery('evt-twice'))
    const [entry] = await inbox.take(1, 10_000)
    const store = new MemoryStore()
    let runs = 0
    const on = { 'message.received': async () => void runs++ }
    // The same entry delivered to two consumers at once, as a queue may.
    const twice: WebhookInbox = Object.assign(Object.create(inbox) as WebhookInbox, {
      take: async () => [entry!],
      complete: async () => true,
      retry: async () => true,
    })
    const a = createInboxWorker({ inbox: twice, on, store, pollIntervalMs: 10, concurrency: 1 })
    const b = createInboxWorker({ inbox: twice, on, store, pollIntervalMs: 10, concurrency: 1 })
    a.start()
    b.start()
    await sleep(150)
    await Promise.all([a.stop(), b.stop()])
    expect(runs).toBe(1)
  })
})
