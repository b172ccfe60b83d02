/**
 * The outage experiment (tools/soak/outage.mjs), 5x faster, on the job-queue engines: the
 * README's Express receiver with `inbox: new BullMQInbox(...)` and a BullMQ Worker, and with
 * `inbox: new PgBossInbox(...)` and `boss.work`, while the handler's database is down for 15 s of
 * 40 s at 20 deliveries/s and every 50th handler takes 12 s. Each engine's own retries carry the
 * deliveries through: the sender sees no failure, none is lost, none runs twice. The handler
 * failing during the outage shows the fault was there. `npm run outage -- --only bullmq,pg-boss`
 * runs it at full length.
 */
import { expect, it } from 'vitest'
import { outageProblems, runOutage } from '../../tools/soak/outage.mjs'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'

async function expectCarriedThrough(mode: 'bullmq' | 'pg-boss') {
  const figures = await runOutage({ mode, scale: 0.2 })
  console.info(`[outage ${mode}]`, JSON.stringify(figures))
  expect(outageProblems(figures)).toEqual([])
  expect(figures.delivered).toBe(figures.deliveries)
  expect(figures.processed).toBe(figures.deliveries)
  expect(figures.handlerFailures).toBeGreaterThan(0)
  expect(figures.maxConsecutiveFailures).toBe(0)
}

describeWithRedis('outage experiment on BullMQ (time x0.2)', () => {
  it('none lost, none twice, no failure seen by the sender', { timeout: 120_000 }, () => expectCarriedThrough('bullmq'))
})

describeWithPostgres('outage experiment on pg-boss (time x0.2)', () => {
  it('none lost, none twice, no failure seen by the sender', { timeout: 120_000 }, () => expectCarriedThrough('pg-boss'))
})
