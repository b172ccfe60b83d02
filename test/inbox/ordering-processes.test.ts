/**
 * Order kept across worker processes on real engines (DESIGN.md "Order within a conversation"):
 * 3 worker processes on one RedisInbox, then on one PostgresInbox, conversations whose messages
 * are appended in a shuffled order while they run, 10 % handler failures, a few deliveries that
 * always fail (dead-lettered: their conversation must go on), and one worker killed with SIGKILL
 * mid-run. Per conversation: starts in created_at order among what was present, never two at
 * once; 0 lost, 0 succeeded twice. The full size of `npm run order:run` (100 conversations × 20
 * messages, scripts/order-run.mjs). On each engine once more with inboxes given the ordering
 * (`filed`): the appends file each delivery and the takes place what they filed.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { runOrderedProcesses } from '../../tools/order/run.mjs'

const SIZE = { conversations: 100, messages: 20, workers: 3, failRate: 0.1, poison: 5, kill: true }

function expectOrdered(result: Awaited<ReturnType<typeof runOrderedProcesses>>): void {
  expect(result.finished).toBe(true)
  expect(result.problems).toEqual([])
  expect(result.figures.lost).toBe(0)
  expect(result.figures.twice).toBe(0)
  expect(result.figures.poisonedDead).toBe(SIZE.poison)
  expect(result.figures.deadReleasedKeys).toBe(true)
  expect(result.figures.killed).toBe(true)
}

describeWithRedis('ordering across 3 worker processes on RedisInbox, one killed', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(() => server?.stop())

  it('per conversation in created_at order, never overlapping, 0 lost, 0 twice, dead letters release their key', async () => {
    expectOrdered(await runOrderedProcesses({ engine: 'redis', url: server.url, ...SIZE }))
  }, 180_000)

  it('the same with every inbox given the ordering: each append files its delivery, the takes place them', async () => {
    expectOrdered(await runOrderedProcesses({ engine: 'redis', url: server.url, ...SIZE, filed: true }))
  }, 180_000)
})

describeWithPostgres('ordering across 3 worker processes on PostgresInbox, one killed', () => {
  let server: PostgresServer
  beforeAll(async () => {
    server = await startPostgresServer()
  }, 60_000)
  afterAll(() => server?.stop())

  it('per conversation in created_at order, never overlapping, 0 lost, 0 twice, dead letters release their key', async () => {
    expectOrdered(await runOrderedProcesses({ engine: 'postgres', url: server.url, ...SIZE }))
  }, 180_000)

  it('the same with inboxes given the ordering: appends file each delivery, the takes place it', async () => {
    expectOrdered(await runOrderedProcesses({ engine: 'postgres', url: server.url, ...SIZE, filed: true }))
  }, 180_000)
})
