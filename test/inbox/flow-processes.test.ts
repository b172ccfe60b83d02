/**
 * Flow control across worker processes (DESIGN.md "Flow control") on a real Redis and Postgres:
 * `rateLimit` shared by 3 worker processes (the measured rate within 10 % of perSecond, over 4 s
 * here; `npm run flow:run` measures 20 s), and `pause()` from another process stopping all of
 * them while a receiver keeps answering 202, every delivery running after `resume()`.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startRedisServer } from '../../tools/redis.mjs'
import { startPostgresServer } from '../../tools/postgres.mjs'
import { measureRate, runPause } from '../../tools/order/flow.mjs'

const engines = [
  ['redis', describeWithRedis, startRedisServer],
  ['postgres', describeWithPostgres, startPostgresServer],
] as const

for (const [engine, describeWith, start] of engines) {
  describeWith(`flow control across 3 worker processes on ${engine}`, () => {
    let server: { url: string; stop(): Promise<void> }
    beforeAll(async () => {
      server = await start()
    }, 60_000)
    afterAll(() => server?.stop())

    it('rateLimit is shared: 3 workers together start within 10 % of perSecond', async () => {
      const result = await measureRate({ engine, url: server.url, perSecond: 40, seconds: 4 })
      expect(result.workersStarting).toBe(3)
      expect(result.measured).toBeGreaterThanOrEqual(36)
      expect(result.measured).toBeLessThanOrEqual(44)
      expect(result.statsRate).toBe(40)
    }, 60_000)

    it('pause() stops every worker, receivers answer 202 meanwhile, everything runs after resume()', async () => {
      const result = await runPause({ engine, url: server.url })
      expect(result.startsBeforePause).toBeGreaterThan(0)
      expect(result.startsWhilePaused).toBe(0)
      expect(result.statuses.every((status) => status === 202)).toBe(true)
      expect(result.statsPaused).toMatchObject({ paused: true, pausedBy: 'deploy by ci' })
      expect(result.startsAfterResume).toBeGreaterThan(0)
      expect(result.missing).toBe(0)
      expect(result.depthAfter).toBe(0)
    }, 90_000)
  })
}
