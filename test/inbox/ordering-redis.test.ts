/**
 * Ordering on RedisInbox against a real redis-server: the same scenarios as the MemoryInbox
 * properties (fewer runs: each is real round trips), with several workers sharing one Redis, so
 * the order is kept by the engine and not by one process. The multi-process run with kill -9 is
 * test/inbox/ordering-processes.test.ts. Also: a worker with `ordering` and one without never run
 * side by side on one inbox.
 */
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { expect, it } from 'vitest'
import { RedisInbox } from 'svc-webhooks/redis'
import { describeWithRedis } from '../support/services.js'
import { useRedisServer } from '../support/redis.js'
import { orderViolations } from '../../tools/order/check.mjs'
import { filedScenarios, raceModeClaims, runMixedWorkers, runScenario, scenarioOrdering, scenarios } from './support/ordering-run.js'

describeWithRedis('ordering on RedisInbox', () => {
  const redis = useRedisServer()

  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const inbox = new RedisInbox({ client: redis.client, prefix: `order-${randomUUID()}:` })
        const record = await runScenario(inbox, s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 40 },
    )
  }, 180_000)

  it('filed at append: the same rules with deliveries filed by an inbox with `ordering` and others appended by one without', async () => {
    await fc.assert(
      fc.asyncProperty(filedScenarios, async (s) => {
        const prefix = `filed-${randomUUID()}:`
        const inbox = new RedisInbox({ client: redis.client, prefix, ordering: scenarioOrdering(s) })
        const record = await runScenario(inbox, s, new RedisInbox({ client: redis.client, prefix }))
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 25 },
    )
  }, 180_000)

  it('an ordered and an unordered worker marking at the same moment: exactly one gets its mark', async () => {
    await raceModeClaims(new RedisInbox({ client: redis.client, prefix: `race-${randomUUID()}:` }))
  })

  it('a worker with `ordering` and one without on the same inbox: the later one takes nothing, says why, and goes on once the other stops', async () => {
    await runMixedWorkers(new RedisInbox({ client: redis.client, prefix: `mixed-${randomUUID()}:` }))
  }, 60_000)
})
