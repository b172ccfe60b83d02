/**
 * The fault-injecting soak in the suite, at a size that runs in seconds: exactly-once must hold
 * across processes and through a store crash. 1,500 deliveries from the sender simulator
 * (spec §6.3 retries, ~30 % duplicates, concurrent resends) to 3 receiver processes sharing one
 * real Redis, handlers failing ~10 % of the time, Redis killed mid-run and back 2.5 s later.
 * The verdict is read from the handlers' own records. `npm run soak` runs the large version.
 */
import { expect, it } from 'vitest'
import { runSoak } from './support/soak/harness.mjs'
import { describeWithRedis } from './support/redis-server.js'

describeWithRedis('soak: 3 receiver processes, one Redis restarted mid-run', () => {
  it('processes every delivery exactly once: none lost, none twice, no permanent refusal', { timeout: 120_000 }, async () => {
    const figures = await runSoak({ count: 1500, concurrency: 32 })
    const { lost, doubled, permanent, gaveUp, unknown, answered2xxButNotProcessed, receivers, ...counts } = figures
    console.info('[soak]', JSON.stringify({ ...counts, lost: lost.length, doubled: doubled.length, receivers }))
    expect(figures.redisRestarted).toBe(true)
    expect(figures.failuresInjected).toBeGreaterThan(0)
    expect(figures.duplicatesSent).toBeGreaterThan(0)
    expect(figures.processed).toBe(1500)
    expect(lost).toEqual([])
    expect(doubled).toEqual([])
    expect(permanent).toEqual([])
    expect(gaveUp).toEqual([])
    expect(unknown).toEqual([])
    expect(answered2xxButNotProcessed).toEqual([])
  })
})
