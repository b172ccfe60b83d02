/**
 * The fault-injecting soaks in the suite, at sizes that run in seconds; `npm run soak` and
 * `npm run outage` run the large versions. Each verdict is read from the handlers' own records.
 *
 * - Handler in the request: 1,500 deliveries from the sender simulator (spec §6.3 retries, ~30 %
 *   duplicates, concurrent resends) to 3 receiver processes sharing one real Redis, handlers
 *   failing ~10 % of the time, Redis killed mid-run and back 2.5 s later: exactly once.
 * - Durable inbox on Redis: receivers appending to RedisInbox, worker processes killed with
 *   SIGKILL and restarted, the inbox's Redis restarted (AOF, fsync always) while workers ack, a
 *   downstream outage that would have disabled a 5xx-answering receiver, handlers that hang (freed
 *   by handlerTimeoutMs) and, where the engine counts hand-outs, a poison delivery crashing every
 *   worker that runs it (at most maxStalledCount + 1 crashes, then dead-lettered): every other
 *   effect applied once, none lost, and the sender never sees 20 consecutive failures.
 * - The outage experiment, 5x faster (but for the sender's 10 s to answer, a wall-clock budget
 *   the machine's own pauses count against): the README's Express receiver with the handler in the
 *   request is disabled within a second of its database going down and loses what follows; with
 *   `inbox` and a worker it loses nothing and runs nothing twice.
 */
import { expect, it } from 'vitest'
import { runSoak } from '../../tools/soak/harness.mjs'
import { inboxSoakProblems, QUICK_INBOX_SOAK, runInboxSoak } from '../../tools/soak/inbox-soak.mjs'
import { outageProblems, runOutageComparison } from '../../tools/soak/outage.mjs'
import { describeWithRedis } from '../support/services.js'

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

describeWithRedis('soak: durable inbox on Redis, workers killed, Redis restarted, a downstream outage, hung handlers, a poison delivery', () => {
  it('applies every effect exactly once and never lets the sender see 20 failures in a row', { timeout: 120_000 }, async () => {
    const figures = await runInboxSoak({ engine: 'redis', ...QUICK_INBOX_SOAK, poison: true })
    const { lost, appliedTwice, rerunAfterKill, rerunOther, permanent, gaveUp, unknown, answered2xxButNotProcessed, receivers, workerStats, ...counts } = figures
    console.info(
      '[inbox soak]',
      JSON.stringify({ ...counts, lost: lost.length, appliedTwice: appliedTwice.length, rerunAfterKill: rerunAfterKill.length, rerunOther: rerunOther.length, receivers, workerStats }),
    )
    // The faults happened.
    expect(figures.restarted).toBe(true)
    expect(figures.killed).toBe(QUICK_INBOX_SOAK.kills)
    expect(figures.duplicatesSent).toBeGreaterThan(0)
    expect(figures.failuresInjected).toBeGreaterThan(0)
    expect(figures.outageMs).toBe(QUICK_INBOX_SOAK.outageMs)
    // Long enough that a receiver answering 5xx for a failing handler would have been disabled:
    // 20 deliveries or more arrived while every handler run failed.
    expect(figures.sentDuringOutage).toBeGreaterThanOrEqual(20)
    expect(figures.longestFailingStreak).toBeGreaterThanOrEqual(20)
    // Counted in the application's log: the workers killed mid-run never print their own counts.
    expect(figures.hungRuns).toBeGreaterThan(0)
    expect(figures.crashes).toBeGreaterThanOrEqual(1)
    expect(figures.crashes).toBeLessThanOrEqual(figures.maxStalledCount + 1)
    expect(figures.poisonDead).toBe(true)
    expect(figures.poisonApplied).toBe(false)
    // The verdict.
    expect(inboxSoakProblems(figures)).toEqual([])
    expect(figures.drained).toBe(true)
    expect(lost).toEqual([])
    expect(appliedTwice).toEqual([])
    // Every delivery but the poison one, which is in the dead letters.
    expect(figures.processed).toBe(QUICK_INBOX_SOAK.count - 1)
    expect(figures.maxConsecutiveFailures).toBeLessThan(20)
    expect(figures.disabled).toBe(false)
    expect(permanent).toEqual([])
    expect(gaveUp).toEqual([])
    expect(unknown).toEqual([])
    expect(answered2xxButNotProcessed).toEqual([])
  })
})

describeWithRedis('outage experiment (time x0.2): Express, database down 15 s of 40 s at 20 deliveries/s', () => {
  it('in the request: disabled and deliveries lost; with the inbox: none lost, none twice, never 20 failures in a row', { timeout: 120_000 }, async () => {
    const { handler, inbox } = await runOutageComparison({ scale: 0.2 })
    console.info('[outage]', JSON.stringify({ handler, inbox }))
    expect(handler.disabled).toBe(true)
    // Not before the database went down (10 s): until then every handler succeeds (the slow one,
    // compressed, answers inside the sender's 10 s), so 20 failures in a row need the outage. No
    // upper bound: how soon after 10 s depends on how fast this machine answers.
    expect(handler.disabledAtS).toBeGreaterThanOrEqual(10)
    expect(handler.lost).toBeGreaterThan(0)
    expect(outageProblems(inbox)).toEqual([])
    expect(inbox.delivered).toBe(inbox.deliveries)
    expect(inbox.processed).toBe(inbox.deliveries)
    expect(inbox.handlerFailures).toBeGreaterThan(0)
    expect(inbox.maxConsecutiveFailures).toBe(0)
  })
})
