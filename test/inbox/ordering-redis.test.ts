/**
 * Ordering on RedisInbox against a real redis-server: the same scenarios as the MemoryInbox
 * properties (fewer runs: each is real round trips), with several workers sharing one Redis, so
 * the order is kept by the engine and not by one process. The multi-process run with kill -9 is
 * test/inbox/ordering-processes.test.ts. Also: a worker with `ordering` and one without never run
 * side by side on one inbox.
 */
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { RedisInbox } from 'svc-webhooks/redis'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { orderViolations } from '../../tools/order/check.mjs'
import { body, delivery, runScenario, scenarios } from './support/ordering-run.js'
import { byConversation, createInboxWorker } from 'svc-webhooks'

describeWithRedis('ordering on RedisInbox', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await startRedisServer()
    client = new Redis(server.url)
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })

  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const inbox = new RedisInbox({ client, prefix: `order-${randomUUID()}:` })
        const record = await runScenario(inbox, s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 40 },
    )
  }, 180_000)

  it('a worker with `ordering` and one without on the same inbox: the later one takes nothing, says why, and goes on once the other stops', async () => {
    const inbox = new RedisInbox({ client, prefix: `mixed-${randomUUID()}:` })
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    const ran = { ordered: [] as string[], unordered: [] as string[] }
    const lines: string[] = []
    const errors: unknown[] = []
    const worker = (ordered: boolean) =>
      createInboxWorker({
        inbox,
        ...(ordered && { ordering: byConversation }),
        pollIntervalMs: 10,
        visibilityTimeoutMs: 3000,
        log: (line) => lines.push(line),
        onError: (error) => errors.push(error),
        on: { 'message.received': (_event, d) => void ran[ordered ? 'ordered' : 'unordered'].push(d.id) },
      })
    const until = async (done: () => boolean | Promise<boolean>) => {
      for (let waited = 0; !(await done()); waited += 10) {
        if (waited > 10_000) throw new Error('timed out')
        await sleep(10)
      }
    }
    const appendSome = async (tag: string, count: number) => {
      for (let i = 0; i < count; i++) await inbox.append(delivery(`${tag}${i}`, body(`k-${tag}`, i), Date.now()))
    }

    const ordered = worker(true)
    ordered.start()
    await appendSome('a', 4)
    await until(() => ran.ordered.length === 4)
    const unordered = worker(false)
    unordered.start()
    await until(() => lines.some((line) => line.includes('a worker with `ordering` runs on this inbox, and this one has none')))
    expect(errors.some((error) => (error as Error).name === 'MixedOrderingError')).toBe(true)
    await appendSome('b', 4)
    await until(async () => (await inbox.stats()).depth === 0)
    // Every one ran under the ordered worker: the unordered one took nothing.
    expect(ran.unordered).toEqual([])
    expect(ran.ordered).toHaveLength(8)

    // The ordered one stops (its mark goes with it): the unordered one goes on at once.
    await ordered.stop()
    await appendSome('c', 3)
    await until(() => ran.unordered.length === 3)
    // And now an ordered worker started beside it waits in turn.
    const late = worker(true)
    late.start()
    await until(() => lines.some((line) => line.includes('a worker without `ordering` runs on this inbox, and this one has `ordering`')))
    await unordered.stop()
    await appendSome('d', 2)
    await until(() => ran.ordered.length === 10)
    await late.stop()
  }, 60_000)
})
