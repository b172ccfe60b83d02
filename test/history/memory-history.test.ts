/**
 * MemoryHistory's storage against a model (fast-check): ids shared by several endpoints, records
 * that change an entry or make one, and `maxEntries` trimming the oldest. The entry a key holds
 * is checked against the same records given alone to an untrimmed history, so what is tested here
 * is which entries are kept and found (by id and endpoint, by id alone, in pages), not the merge
 * rules (history.test.ts compares those with RedisHistory's).
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryHistory, type HistoryRecord } from 'svc-webhooks/history'

const ENDPOINTS = ['a', 'b', 'c']
const OUTCOMES = ['accepted', 'processed', 'failed', 'retrying'] as const

interface Step {
  id: number
  endpoint: number
  outcome: number
  delivered: boolean
}

const step: fc.Arbitrary<Step> = fc.record({ id: fc.nat(5), endpoint: fc.nat(ENDPOINTS.length - 1), outcome: fc.nat(OUTCOMES.length - 1), delivered: fc.boolean() })

async function pages(history: MemoryHistory, limit: number): Promise<string[]> {
  const seen: string[] = []
  let cursor: string | undefined
  // Bounded: every page but the last holds `limit` entries of at most 6 × 3.
  for (let page = 0; page < 40; page++) {
    const listed = await history.list({ limit, ...(cursor !== undefined && { cursor }) })
    seen.push(...listed.entries.map((e) => `${e.endpoint}/${e.id}`))
    if (listed.cursor === undefined) return seen
    cursor = listed.cursor
  }
  throw new Error('list() did not end')
}

describe('MemoryHistory storage', () => {
  it('keeps the newest maxEntries entries, finds each by id and endpoint and by id alone, and pages them newest first', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 80 }), fc.integer({ min: 1, max: 8 }), async (steps, maxEntries) => {
        const base = Date.now()
        const history = new MemoryHistory({ maxEntries, now: () => base + steps.length })
        /** Each key's records, and the keys in the order their entries were made. */
        const records = new Map<string, HistoryRecord[]>()
        const made: string[] = []
        for (const [i, s] of steps.entries()) {
          const r: HistoryRecord = { id: `evt_${s.id}`, endpoint: ENDPOINTS[s.endpoint]!, at: base + i, outcome: OUTCOMES[s.outcome]!, delivered: s.delivered }
          const key = `${r.endpoint}/${r.id}`
          // A trimmed key's next record makes a new entry.
          if (!made.slice(-maxEntries).includes(key)) {
            made.push(key)
            records.set(key, [])
          }
          records.get(key)!.push(r)
          history.record(r)
        }
        const kept = made.slice(-maxEntries)
        expect(await history.size()).toBe(kept.length)
        for (let id = 0; id <= 5; id++) {
          for (const endpoint of ENDPOINTS) {
            const key = `${endpoint}/evt_${id}`
            if (!kept.includes(key)) {
              expect(await history.get(`evt_${id}`, endpoint)).toBeUndefined()
              continue
            }
            const alone = new MemoryHistory({ now: () => base + steps.length })
            for (const r of records.get(key)!) alone.record(r)
            expect(await history.get(`evt_${id}`, endpoint)).toEqual(await alone.get(`evt_${id}`, endpoint))
          }
          // By id alone: the entry of that id made last, while it is kept.
          const newest = made.filter((k) => k.endsWith(`/evt_${id}`)).at(-1)
          const found = await history.get(`evt_${id}`)
          if (newest === undefined || !kept.includes(newest)) expect(found).toBeUndefined()
          else expect(found && `${found.endpoint}/${found.id}`).toBe(newest)
        }
        expect(await pages(history, 3)).toEqual([...kept].reverse())
        expect(await pages(history, 500)).toEqual([...kept].reverse())
      }),
      { numRuns: 300 },
    )
  })
})
