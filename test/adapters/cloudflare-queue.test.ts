/**
 * Cloudflare Queues as the durable inbox, inside real workerd (Miniflare): a Worker bound to a
 * Queue as producer and consumer (cloudflare-queue.worker.ts). `fetch` answers 202 once the
 * delivery is in the Queue; `queue()` runs each handler once per id with the raw bytes, retries
 * failures with backoff until the Queue's max_retries moves them to its dead-letter queue.
 */
import { readFileSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { Miniflare, type MiniflareOptions } from 'miniflare'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import type { InboxWorkerResult } from 'svc-webhooks'
import type { QueueBatchLike, QueueProducerLike, WebhookWorker } from 'svc-webhooks/cloudflare'
import { sampleEvent, signWebhook, type SignedWebhook } from 'svc-webhooks/testing'
import { bundleWorker, COMPATIBILITY_DATE } from '../support/workerd.js'

const SECRET = 'svc_whsec_QueueInboxTestSecret'
const MAX_RETRIES = 2

interface State {
  runs: { id: string; text: string; rawBody: string; at: number }[]
  results: (Omit<InboxWorkerResult, 'error'> & { error?: string; at: number })[]
  dead: { id: string; attempts: number }[]
  scopes: { operation: 'receive' | 'process'; id?: string; traceparent?: string; outcome: string }[]
  aborted: { id: string; reason: string }[]
}

/** Miniflare on 127.0.0.1 with a Queue bound as producer and consumer (test/support/workerd.ts binds no queues). */
async function startQueueWorker(script: string, options: Pick<MiniflareOptions, 'bindings' | 'queueProducers' | 'queueConsumers'>) {
  let output = ''
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { WEBHOOK_IDEMPOTENCY: { className: 'WebhookIdempotencyObject', useSQLite: true } },
    host: '127.0.0.1',
    port: 0,
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    },
    ...options,
  } as MiniflareOptions)
  try {
    return { mf, url: (await mf.ready).origin, logs: () => output }
  } catch (error) {
    await mf.dispose().catch(() => undefined)
    throw error
  }
}

let mf: Miniflare | undefined
let url = ''
let logs = () => ''

beforeAll(async () => {
  ;({ mf, url, logs } = await startQueueWorker(await bundleWorker('test/adapters/cloudflare-queue.worker.ts'), {
    bindings: { SVC_WEBHOOK_SECRET: SECRET },
    queueProducers: { WEBHOOK_QUEUE: { queueName: 'webhooks' } },
    queueConsumers: {
      webhooks: { maxBatchSize: 10, maxBatchTimeout: 0.1, maxRetries: MAX_RETRIES, deadLetterQueue: 'webhooks-dlq' },
      'webhooks-dlq': { maxBatchTimeout: 0.1 },
    },
  }))
})

afterAll(async () => {
  await mf?.dispose()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits (bounded) until `done(state)` holds, and returns that state. */
async function until(done: (state: State) => boolean, timeoutMs = 10_000): Promise<State> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const state = (await (await fetch(`${url}/state`)).json()) as State
    if (done(state)) return state
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms: ${JSON.stringify(state).slice(0, 2000)}`)
    await sleep(50)
  }
}

async function signed(text: string, id?: string): Promise<SignedWebhook> {
  const event = sampleEvent('message.received')
  event.message.text = text
  return signWebhook({ secret: SECRET, event, ...(id && { id }) })
}

async function post(delivery: SignedWebhook, path = '/webhooks/svc') {
  const res = await fetch(url + path, { method: 'POST', body: delivery.body, headers: delivery.headers })
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json: (await res.json()) as Record<string, unknown> }
}

const of = (state: State, id: string) => ({
  runs: state.runs.filter((run) => run.id === id),
  outcomes: state.results.filter((result) => result.id === id).map((result) => result.outcome),
  results: state.results.filter((result) => result.id === id),
})

describe('cloudflare: Queues as the durable inbox (workerd)', () => {
  it('answers 202 once in the Queue; the consumer runs each handler exactly once, with the raw bytes and the parsed event', async () => {
    const deliveries = await Promise.all(Array.from({ length: 8 }, (_, i) => signed(`hello ${i}`)))
    const answers = await Promise.all(deliveries.map((delivery) => post(delivery)))
    expect(answers.map((a) => [a.status, a.json])).toEqual(deliveries.map(() => [202, { ok: true, accepted: true }]))
    const state = await until((s) => deliveries.every((d) => of(s, d.id).outcomes.includes('processed')))
    for (const [i, delivery] of deliveries.entries()) {
      const { runs, outcomes } = of(state, delivery.id)
      expect(outcomes).toEqual(['processed'])
      expect(runs).toHaveLength(1)
      expect(runs[0]).toMatchObject({ text: `hello ${i}`, rawBody: delivery.body })
    }
  })

  it('telemetry: the consumer\'s process scope starts with the trace context of the scope that received the delivery', async () => {
    const delivery = await signed('traced')
    expect((await post(delivery)).status).toBe(202)
    const state = await until((s) => s.scopes.some((scope) => scope.operation === 'process' && scope.id === delivery.id))
    const receive = state.scopes.find((scope) => scope.operation === 'receive' && scope.id === delivery.id)!
    const process = state.scopes.find((scope) => scope.operation === 'process' && scope.id === delivery.id)!
    expect(receive.outcome).toBe('accepted')
    expect(process.traceparent).toBe(receive.traceparent)
    expect(process.outcome).toBe('processed')
  })

  it('answers a resend of an accepted or processed id 200 duplicate and never runs it again', async () => {
    const first = await signed('resent')
    const resend = () => signWebhook({ secret: SECRET, body: first.body, id: first.id, timestamp: first.timestamp + 1 })
    expect(await post(first)).toMatchObject({ status: 202, json: { ok: true, accepted: true } })
    // Accepted, maybe not processed yet.
    expect(await post(await resend())).toMatchObject({ status: 200, json: { ok: true, duplicate: true } })
    await until((s) => of(s, first.id).outcomes.includes('processed'))
    expect(await post(await resend())).toMatchObject({ status: 200, json: { ok: true, duplicate: true } })
    await sleep(500) // several batch timeouts: nothing else may arrive
    const { runs, outcomes } = of(await until(() => true), first.id)
    expect(runs).toHaveLength(1)
    expect(outcomes).toEqual(['processed'])
  })

  it('retries a handler that throws with message.retry({ delaySeconds: 1 }), then runs it to success', async () => {
    const delivery = await signed('fail-once')
    expect((await post(delivery)).status).toBe(202)
    const { runs, results } = of(await until((s) => of(s, delivery.id).outcomes.includes('processed')), delivery.id)
    expect(results.map(({ outcome, attempts, retryInMs }) => ({ outcome, attempts, retryInMs }))).toEqual([
      { outcome: 'retrying', attempts: 1, retryInMs: 1000 },
      { outcome: 'processed', attempts: 2, retryInMs: undefined },
    ])
    expect(results[0]!.error).toContain('the handler failed')
    expect(runs).toHaveLength(2)
    expect(runs[1]!.at - runs[0]!.at).toBeGreaterThanOrEqual(900)
  })

  it('a handler that never settles: past handlerTimeoutMs its signal aborts, the message is retried, and the retry meets its claim still held (in_flight), never running beside it', async () => {
    const hung = await signed('hang-once')
    const beside = await Promise.all([signed('beside 1'), signed('beside 2')])
    for (const delivery of [hung, ...beside]) expect((await post(delivery)).status).toBe(202)
    const state = await until((s) => of(s, hung.id).outcomes.includes('in_flight') && beside.every((d) => of(s, d.id).outcomes.includes('processed')))
    const { outcomes, results, runs } = of(state, hung.id)
    expect(outcomes).toEqual(['retrying', 'in_flight'])
    expect(results[0]).toMatchObject({ error: 'TimeoutError: handler timed out after 500 ms', retryInMs: 1000 })
    // The abandoned run still holds the id: it is looked at again once its claim's lease is over.
    expect(results[1]).toMatchObject({ retryInMs: 15 * 60 * 1000 })
    expect(runs).toHaveLength(1)
    expect(state.aborted).toEqual([{ id: hung.id, reason: 'TimeoutError: handler timed out after 500 ms' }])
    for (const d of beside) expect(of(state, d.id).outcomes).toEqual(['processed'])
  })

  it(`backs off 1 s, 2 s, and after max_retries (${MAX_RETRIES}) the Queue moves the message to its dead-letter queue`, async () => {
    const delivery = await signed('fail-always')
    expect((await post(delivery)).status).toBe(202)
    const state = await until((s) => s.dead.some((d) => d.id === delivery.id), 15_000)
    const { runs, results } = of(state, delivery.id)
    expect(results.map(({ outcome, attempts, retryInMs }) => ({ outcome, attempts, retryInMs }))).toEqual([
      { outcome: 'retrying', attempts: 1, retryInMs: 1000 },
      { outcome: 'retrying', attempts: 2, retryInMs: 2000 },
      { outcome: 'retrying', attempts: 3, retryInMs: 4000 },
    ])
    expect(runs).toHaveLength(MAX_RETRIES + 1)
    expect(runs[1]!.at - runs[0]!.at).toBeGreaterThanOrEqual(900)
    expect(runs[2]!.at - runs[1]!.at).toBeGreaterThanOrEqual(1900)
    expect(state.dead.filter((d) => d.id === delivery.id)).toHaveLength(1)
  })

  it('acks an event type with no handler without running it (and the receiver does not even append it)', async () => {
    const body = JSON.stringify({ event: 'template.approved', template_id: crypto.randomUUID() })
    const unknown = await signWebhook({ secret: SECRET, body })
    expect(await post(unknown)).toMatchObject({ status: 200, json: { ok: true, ignored: true } })
    // One accepted before its handler was removed reaches the consumer anyway.
    const id = crypto.randomUUID()
    await fetch(`${url}/copies`, { method: 'POST', body: JSON.stringify({ id, body, copies: 1 }) })
    await until((s) => of(s, id).outcomes.length > 0)
    await sleep(1500) // past the first retry delay: a retried message would be back by now
    const state = await until(() => true)
    expect(of(state, id).results.map(({ outcome, attempts, eventType }) => ({ outcome, attempts, eventType }))).toEqual([
      { outcome: 'ignored', attempts: 1, eventType: 'template.approved' },
    ])
    expect(state.runs.some((run) => run.id === id || run.id === unknown.id)).toBe(false)
    expect(state.dead.some((d) => d.id === id)).toBe(false)
  })

  it('runs a delivery the Queue hands out more than once only once (the processed record)', async () => {
    const id = crypto.randomUUID()
    const event = sampleEvent('message.received')
    event.message.text = 'copied'
    const body = JSON.stringify(event)
    // Two copies at once: one runs, the other finds the id held (retried after the lease) or done.
    await fetch(`${url}/copies`, { method: 'POST', body: JSON.stringify({ id, body, copies: 2 }) })
    await until((s) => of(s, id).outcomes.length >= 2)
    // A later copy finds it processed and is acked.
    await fetch(`${url}/copies`, { method: 'POST', body: JSON.stringify({ id, body, copies: 1 }) })
    const { runs, outcomes } = of(await until((s) => of(s, id).outcomes.length >= 3), id)
    expect(runs).toHaveLength(1)
    expect(outcomes.filter((o) => o === 'processed')).toHaveLength(1)
    expect(outcomes.slice(0, 2).sort()).toEqual(outcomes.includes('in_flight') ? ['in_flight', 'processed'] : ['duplicate', 'processed'])
    expect(outcomes[2]).toBe('duplicate')
    // A copy that found the id held is retried after the 15 min lease; there is one such record
    // exactly when an in_flight outcome was recorded above.
    const wasHeld = outcomes.includes('in_flight')
    const held = of(await until(() => true), id).results.find((r) => r.outcome === 'in_flight')
    expect(held !== undefined).toBe(wasHeld)
    expect(held?.retryInMs).toBe(wasHeld ? 15 * 60 * 1000 : undefined)
  })

  it('a Queue that refuses one send: tried again inside the request, 202', async () => {
    const delivery = await signed('queue blip')
    await fetch(`${url}/refuse-sends`, { method: 'POST', body: '1' })
    expect(await post(delivery, '/flaky')).toMatchObject({ status: 202, json: { ok: true, accepted: true } })
    const { runs } = of(await until((s) => of(s, delivery.id).outcomes.includes('processed')), delivery.id)
    expect(runs).toHaveLength(1)
  })

  it('answers 503 with Retry-After when the Queue refuses every send for longer than inboxWaitMs, and frees the id so the retry is accepted', async () => {
    const delivery = await signed('queue down')
    await fetch(`${url}/refuse-sends`, { method: 'POST', body: '1000' })
    expect(await post(delivery, '/flaky')).toMatchObject({ status: 503, retryAfter: '5', json: { ok: false, code: 'inbox_unavailable' } })
    await fetch(`${url}/refuse-sends`, { method: 'POST', body: '0' })
    const retry = await signWebhook({ secret: SECRET, body: delivery.body, id: delivery.id, timestamp: delivery.timestamp + 1 })
    expect(await post(retry, '/flaky')).toMatchObject({ status: 202, json: { ok: true, accepted: true } })
    const { runs, outcomes } = of(await until((s) => of(s, delivery.id).outcomes.includes('processed')), delivery.id)
    expect(runs).toHaveLength(1)
    expect(outcomes).toEqual(['processed'])
  })

  it('refuses `queue` without a shared store: 500 and a log line that says what to add', async () => {
    const res = await post(await signed('no store'), '/no-store')
    expect(res).toMatchObject({ status: 500, json: { ok: false, code: 'internal_error' } })
    for (let i = 0; i < 50 && !logs().includes('needs `store'); i++) await sleep(50)
    expect(logs()).toContain('`queue` needs `store: new DurableObjectStore(env.WEBHOOK_IDEMPOTENCY)`')
    expect(logs()).not.toContain(SECRET)
  })

  it('types: the Worker takes workers-types bindings and batches', () => {
    type Queue = import('@cloudflare/workers-types').Queue
    type MessageBatch = import('@cloudflare/workers-types').MessageBatch
    expectTypeOf<Queue>().toExtend<QueueProducerLike>()
    expectTypeOf<MessageBatch>().toExtend<QueueBatchLike>()
    expectTypeOf<WebhookWorker<object>['queue']>().parameter(0).toEqualTypeOf<QueueBatchLike>()
  })
})

describe('cloudflare: the queue variant of examples/cloudflare runs in workerd as its README says', () => {
  let example: Awaited<ReturnType<typeof startQueueWorker>> | undefined
  afterAll(async () => {
    await example?.mf.dispose()
  })

  it('answers 202, then the resend 200 duplicate; queue() logs the handler once; 404 elsewhere', async () => {
    // The bindings and consumer settings as wrangler.queue.toml declares them (the batch timeout shortened).
    const toml = readFileSync('examples/cloudflare/wrangler.queue.toml', 'utf8')
    const value = (key: string) => toml.match(new RegExp(`^${key} = "?([^"\\n]+)"?$`, 'm'))![1]!
    const queueName = value('queue')
    example = await startQueueWorker(await bundleWorker('examples/cloudflare/src/queue-worker.ts'), {
      bindings: { SVC_WEBHOOK_SECRET: 'svc_whsec_test' },
      queueProducers: { [value('binding')]: { queueName } },
      queueConsumers: {
        [queueName]: { maxBatchSize: Number(value('max_batch_size')), maxBatchTimeout: 0.1, maxRetries: Number(value('max_retries')), deadLetterQueue: value('dead_letter_queue') },
      },
    })
    const event = sampleEvent('message.received')
    const first = await signWebhook({ secret: 'svc_whsec_test', event })
    const again = await signWebhook({ secret: 'svc_whsec_test', event, id: first.id, timestamp: first.timestamp + 1 })
    const answers = []
    for (const delivery of [first, again]) {
      const res = await fetch(`${example.url}/webhooks/svc`, { method: 'POST', body: delivery.body, headers: delivery.headers })
      answers.push({ status: res.status, json: await res.json() })
    }
    expect(answers).toEqual([
      { status: 202, json: { ok: true, accepted: true } },
      { status: 200, json: { ok: true, duplicate: true } },
    ])
    const other = await fetch(`${example.url}/`)
    expect(other.status).toBe(404)
    await other.text()
    for (let i = 0; i < 100 && !example.logs().includes(`(delivery ${first.id})`); i++) await sleep(50)
    await sleep(300)
    expect(example.logs().split(`(delivery ${first.id})`)).toHaveLength(2)
  })
})
