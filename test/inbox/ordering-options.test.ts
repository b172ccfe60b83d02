/**
 * What `ordering`, `rateLimit` and `pause()` do with bad input and on engines that cannot keep
 * them: a key function that throws or returns a non-string is that delivery's failure (retried,
 * then dead-lettered with the reason), never a stalled conversation; `ordering` on an engine
 * that cannot keep it (BullMQ, pg-boss, the Cloudflare Queues consumer, an inbox without the
 * ordering calls) and `rateLimit` on one that cannot share it are TypeErrors at construction that
 * say why. A pause is logged once per worker with who paused, and shows in stats().
 */
import { describe, expect, expectTypeOf, it } from 'vitest'
import {
  MemoryInbox,
  byConversation,
  createInboxWorker,
  type FlowEngine,
  type InboxDelivery,
  type InboxStats,
  type InboxWorker,
  type OrderingEngine,
  type OrderingKey,
  type OrderingOption,
  type VerifiedDelivery,
  type WebhookEvent,
  type WebhookInbox,
} from 'svc-webhooks'
import { createBullMQProcessor } from 'svc-webhooks/bullmq'
import { createPgBossHandler } from 'svc-webhooks/pg-boss'
import { createQueueConsumer } from 'svc-webhooks/cloudflare'
import { messageBody } from '../../tools/order/run.mjs'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function delivery(id: string, c: number, index: number): InboxDelivery {
  return { keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(Date.now() / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(c, index), receivedAt: Date.now() }
}

async function until(check: () => Promise<boolean> | boolean, ms = 5000): Promise<void> {
  for (let waited = 0; waited < ms; waited += 10) {
    if (await check()) return
    await sleep(10)
  }
  throw new Error('timed out')
}

/** An inbox with only the contract's calls: it cannot keep order across workers. */
function plainInbox(): WebhookInbox {
  const memory = new MemoryInbox()
  return {
    append: (d) => memory.append(d),
    take: (max, ms) => memory.take(max, ms),
    complete: (e) => memory.complete(e),
    retry: (e, ms, error) => memory.retry(e, ms, error),
    bury: (e, error) => memory.bury(e, error),
    extend: (e, ms) => memory.extend(e, ms),
    dead: (limit) => memory.dead(limit),
    requeue: (key) => memory.requeue(key),
    purge: (key) => memory.purge(key),
    stats: () => memory.stats(),
  }
}

describe('ordering: refusals at construction', () => {
  it('an inbox that cannot keep order is a TypeError, not an unordered run', () => {
    expect(() => createInboxWorker({ inbox: plainInbox(), on: {}, ordering: byConversation })).toThrow(/keeps order across worker processes/)
    expect(() => createInboxWorker({ inbox: new MemoryInbox(), on: {}, ordering: 'conversation' as never })).toThrow(TypeError)
    expect(() => createInboxWorker({ inbox: new MemoryInbox(), on: {}, ordering: { key: byConversation, strict: 'yes' as never } })).toThrow(/strict/)
  })

  it('BullMQ, pg-boss and the Cloudflare Queues consumer refuse ordering with the reason', () => {
    expect(() => createBullMQProcessor({ on: {}, ordering: byConversation as never })).toThrow(/BullMQ Pro/)
    expect(() => createPgBossHandler({ on: {}, ordering: byConversation as never })).toThrow(/key_strict_fifo/)
    const store = { claim: async () => 'claimed', complete: async () => undefined, release: async () => undefined }
    expect(() => createQueueConsumer({ on: {}, store: store as never, ordering: byConversation as never })).toThrow(/concurrently, in no order by key/)
  })

  it('rateLimit: a positive rate, on an engine that shares it', () => {
    expect(() => createInboxWorker({ inbox: new MemoryInbox(), on: {}, rateLimit: { perSecond: 0 } })).toThrow(/perSecond/)
    expect(() => createInboxWorker({ inbox: plainInbox(), on: {}, rateLimit: { perSecond: 5 } })).toThrow(/token bucket/)
  })
})

describe('ordering: a key function that fails', () => {
  for (const [name, key] of [
    ['throws', (event: WebhookEvent) => (JSON.stringify(event).includes('msg-0-1"') ? (() => { throw new RangeError('bad') })() : byConversation(event))],
    ['returns a number', (event: WebhookEvent) => (JSON.stringify(event).includes('msg-0-1"') ? (7 as unknown as string) : byConversation(event))],
  ] as const) {
    it(`${name}: that delivery is retried then dead-lettered with the reason; its conversation goes on`, async () => {
      const inbox = new MemoryInbox()
      const ran: string[] = []
      const worker = createInboxWorker({
        inbox,
        ordering: key,
        pollIntervalMs: 5,
        firstRetryDelayMs: 5,
        maxRetryDelayMs: 10,
        maxRetryAgeMs: 100,
        log: false,
        on: { 'message.received': async (_event, d) => void ran.push(d.id) },
      })
      for (let i = 0; i < 4; i++) await inbox.append(delivery(`d${i}`, 0, i))
      worker.start()
      await until(async () => (await inbox.stats()).depth === 0)
      await worker.stop()
      expect(ran).toEqual(['d0', 'd2', 'd3'])
      const [dead] = await inbox.dead()
      expect(dead?.id).toBe('d1')
      expect(dead?.attempts).toBeGreaterThan(1)
      expect(dead?.lastError).toMatch(/OrderingKeyError: the ordering key function (threw \(RangeError\)|returned number)/)
    })
  }
})

describe('pause and rate limit on one inbox', () => {
  it('pause() stops every worker, is logged once each with who paused, shows in stats(); resume() lets all run', async () => {
    const inbox = new MemoryInbox()
    const lines: string[] = []
    const ran: string[] = []
    const workers = [1, 2].map(() =>
      createInboxWorker({ inbox, pollIntervalMs: 5, log: (line) => void lines.push(line), on: { 'message.received': async (_e, d) => void ran.push(d.id) } }),
    )
    for (const worker of workers) worker.start()
    await workers[0]!.pause('alice (deploy 42)')
    for (let i = 0; i < 10; i++) await inbox.append(delivery(`p${i}`, i, 0))
    await sleep(200)
    expect(ran).toEqual([])
    expect(await inbox.stats()).toMatchObject({ depth: 10, paused: true, pausedBy: 'alice (deploy 42)' })
    expect(lines.filter((line) => line.includes('paused by alice (deploy 42)'))).toHaveLength(2)
    await workers[1]!.resume()
    await until(() => ran.length === 10)
    expect(lines.filter((line) => line.includes('resumed'))).toHaveLength(2)
    expect((await inbox.stats()).paused).toBe(false)
    await Promise.all(workers.map((worker) => worker.stop()))
  })

  it('rateLimit is shared by the workers of one inbox, and shown in stats()', async () => {
    const inbox = new MemoryInbox()
    const starts: number[] = []
    const workers = [1, 2, 3].map(() =>
      createInboxWorker({ inbox, pollIntervalMs: 5, rateLimit: { perSecond: 50 }, log: false, on: { 'message.received': async () => void starts.push(Date.now()) } }),
    )
    for (let i = 0; i < 400; i++) await inbox.append(delivery(`r${i}`, i, 0))
    const from = Date.now()
    for (const worker of workers) worker.start()
    await sleep(2000)
    await Promise.all(workers.map((worker) => worker.stop()))
    const rate = starts.filter((t) => t >= from + 200 && t < from + 2000).length / 1.8
    expect(rate).toBeGreaterThan(45)
    expect(rate).toBeLessThan(55)
    expect((await inbox.stats()).rateLimitPerSecond).toBe(50)
  })
})

describe('ordering: public types', () => {
  it('byConversation is an OrderingKey, delivery.late a boolean, pause and resume on the worker', () => {
    expectTypeOf(byConversation).toEqualTypeOf<OrderingKey>()
    expectTypeOf<OrderingOption>().toMatchTypeOf<OrderingKey | { key: OrderingKey; strict?: boolean }>()
    expectTypeOf<VerifiedDelivery['late']>().toEqualTypeOf<boolean | undefined>()
    expectTypeOf<InboxWorker['pause']>().toEqualTypeOf<(by?: string) => Promise<void>>()
    expectTypeOf<InboxStats['paused']>().toEqualTypeOf<boolean | undefined>()
    // An engine that keeps order implements both interfaces.
    expectTypeOf<MemoryInbox>().toMatchTypeOf<OrderingEngine & FlowEngine>()
  })
})
