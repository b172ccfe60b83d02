/**
 * Redis failovers as an operator's maintenance night goes, on real processes on 127.0.0.1 (a
 * primary, two replicas, three sentinels; tools/redis-sentinel.mjs) under signed deliveries at
 * 50/s from the sender simulator (tools/failover.mjs): kill -9 of the primary while the receiver
 * runs its handler over RedisStore, and while it appends to a RedisInbox drained by a worker; then
 * every delivery resent. What is checked is what the sender and the handler would count:
 * non-2xx in a row (the sender disables the endpoint at 20), permanent 4xx, deliveries answered
 * 2xx and never run, and runs of one delivery twice. Scaled down from 2,000 deliveries to 400 at
 * the same 50/s so each scenario takes about 15 s; Sentinel's down-after-milliseconds is 5 s, so
 * the switch takes about 6 s, as the measurements.
 */
import { describe, expect, it } from 'vitest'
import { describeWithRedis } from '../support/services.js'
import { runRedisFailover } from '../../tools/failover.mjs'

const SCENARIO_MS = 90_000

describeWithRedis('Redis Sentinel failover inside the sender\'s window', () => {
  describe('kill -9 of the primary (about 6 s to switch)', () => {
    it('RedisStore: no failed answer, none lost, none run twice, the resend all duplicates', async () => {
      const figures = await runRedisFailover({ path: 'store', fault: 'kill' })
      expect(figures.switchMs).toBeLessThan(8000)
      expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0, lost: 0, twice: 0, resendFailures: 0 })
      expect(figures.maxLatencyMs).toBeLessThan(10_000)
    }, SCENARIO_MS)

    it('RedisInbox + worker: no failed answer, none lost, none run twice', async () => {
      const figures = await runRedisFailover({ path: 'inbox', fault: 'kill' })
      expect(figures.switchMs).toBeLessThan(8000)
      expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0, lost: 0, twice: 0, resendFailures: 0 })
      expect(figures.maxLatencyMs).toBeLessThan(10_000)
    }, SCENARIO_MS)
  })
})
