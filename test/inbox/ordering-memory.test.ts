/**
 * The ordering rules (DESIGN.md "Order within a conversation") as properties on MemoryInbox: any
 * arrival order, any failure pattern, any number of workers and any concurrency. Per key, starts
 * follow `created_at` among the deliveries present, never two at once, every delivery succeeds
 * once or is dead-lettered, and `late` says exactly when a later message of its key went first.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryInbox } from 'svc-webhooks'
import { orderViolations } from '../../tools/order/check.mjs'
import { filedScenarios, runMixedWorkers, runScenario, scenarioOrdering, scenarios } from './support/ordering-run.js'

describe('ordering on MemoryInbox (properties)', () => {
  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const record = await runScenario(new MemoryInbox(), s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        // A delivery that never fails is processed, whatever fails around it.
        const dead = new Set(record.dead.map((d) => d.id))
        s.failures.forEach((f, i) => {
          if (f === 0) expect(dead.has(`d${i}`)).toBe(false)
        })
      }),
      { numRuns: 40 },
    )
  }, 120_000)

  it('filed at append: the same rules with deliveries filed by an inbox with `ordering` and others placed by the workers', async () => {
    await fc.assert(
      fc.asyncProperty(filedScenarios, async (s) => {
        const inbox = new MemoryInbox({ ordering: scenarioOrdering(s) })
        // The same memory without `ordering`: a receiver that does not file.
        const unfiled = Object.create(inbox, { ordering: { value: undefined } }) as MemoryInbox
        const record = await runScenario(inbox, s, unfiled)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 40 },
    )
  }, 120_000)

  it('a worker with `ordering` and one without on the same inbox: the later one takes nothing, says why, and goes on once the other stops', async () => {
    await runMixedWorkers(new MemoryInbox())
  }, 60_000)
})
