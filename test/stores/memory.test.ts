/**
 * MemoryStore, the single-process default: the store contract every store runs (contract.ts),
 * then what only MemoryStore has, against an injected clock: leases and owner tokens to the
 * millisecond, retention, the `maxEntries` bound, and no timer that keeps the process alive.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from 'svc-webhooks'
import { describeStoreContract } from './contract.js'

describe('store contract: MemoryStore', () => {
  describeStoreContract(async () => ({ store: new MemoryStore(), close: async () => {} }))
})

const LEASE = 60_000
const RETENTION = 72 * 3600_000

function clocked(maxEntries?: number) {
  const clock = { now: 1_763_806_530_000 }
  const store = new MemoryStore({ now: () => clock.now, ...(maxEntries ? { maxEntries } : {}) })
  return { store, clock }
}

describe('MemoryStore: claims and leases', () => {
  it('a claim holds the id until its lease expires, then a second claim gets in', async () => {
    const { store, clock } = clocked()
    expect(await store.claim('ep:1', 'owner-a', LEASE)).toBe('claimed')
    expect(await store.claim('ep:1', 'owner-b', LEASE)).toBe('in_flight')
    clock.now += LEASE - 1
    expect(await store.claim('ep:1', 'owner-b', LEASE)).toBe('in_flight')
    clock.now += 1
    expect(await store.claim('ep:1', 'owner-b', LEASE)).toBe('claimed')
    // The first owner's lease is gone: its completion still records the id, but reports it lost the claim.
    expect(await store.complete('ep:1', 'owner-a', RETENTION)).toBe(false)
    expect(await store.claim('ep:1', 'owner-c', LEASE)).toBe('completed')
  })

  it('only the owner token releases a claim', async () => {
    const { store } = clocked()
    await store.claim('ep:2', 'owner-a', LEASE)
    expect(await store.release('ep:2', 'owner-b')).toBe(false)
    expect(await store.claim('ep:2', 'owner-b', LEASE)).toBe('in_flight')
    expect(await store.release('ep:2', 'owner-a')).toBe(true)
    expect(await store.release('ep:2', 'owner-a')).toBe(false)
    expect(await store.claim('ep:2', 'owner-b', LEASE)).toBe('claimed')
  })

  it('a release does not undo a completion', async () => {
    const { store } = clocked()
    await store.claim('ep:3', 'owner-a', LEASE)
    expect(await store.complete('ep:3', 'owner-a', RETENTION)).toBe(true)
    expect(await store.release('ep:3', 'owner-a')).toBe(false)
    expect(await store.claim('ep:3', 'owner-b', LEASE)).toBe('completed')
  })

  it('keys are exact: ids in different endpoint namespaces do not collide', async () => {
    const { store } = clocked()
    await store.claim('orders:1', 'a', LEASE)
    await store.complete('orders:1', 'a', RETENTION)
    expect(await store.claim('support:1', 'b', LEASE)).toBe('claimed')
  })
})

describe('MemoryStore: retention', () => {
  it('a completed id is a duplicate for the retention window, then expires', async () => {
    const { store, clock } = clocked()
    await store.claim('ep:r', 'a', LEASE)
    await store.complete('ep:r', 'a', RETENTION)
    clock.now += RETENTION - 1000
    expect(await store.claim('ep:r', 'b', LEASE)).toBe('completed')
    // Expiry is kept at whole-second resolution, rounded up: never shorter than asked.
    clock.now += 2000
    expect(await store.claim('ep:r', 'b', LEASE)).toBe('claimed')
  })

  it('expired completions are swept when new entries arrive', async () => {
    const { store, clock } = clocked()
    for (let i = 0; i < 10; i++) {
      await store.claim(`ep:${i}`, 'a', LEASE)
      await store.complete(`ep:${i}`, 'a', 1000)
    }
    expect(store.size).toBe(10)
    clock.now += 5000
    await store.claim('ep:new', 'a', LEASE)
    expect(store.size).toBe(1)
  })
})

describe('MemoryStore: the maxEntries bound', () => {
  it('evicts the oldest completions first and never holds more than maxEntries', async () => {
    const { store, clock } = clocked(3)
    for (const id of ['a', 'b', 'c', 'd']) {
      await store.claim(id, 'o', LEASE)
      await store.complete(id, 'o', RETENTION)
      clock.now += 10
      expect(store.size).toBeLessThanOrEqual(3)
    }
    expect(await store.claim('a', 'o', LEASE)).toBe('claimed') // evicted: could run again
    for (const id of ['c', 'd']) expect(await store.claim(id, 'o', LEASE)).toBe('completed')
    expect(store.size).toBeLessThanOrEqual(3)
  })

  it('keeps live claims over completions, and evicts the oldest claim only when nothing else is left', async () => {
    const { store } = clocked(2)
    await store.claim('done', 'o', LEASE)
    await store.complete('done', 'o', RETENTION)
    await store.claim('live-1', 'o', LEASE)
    await store.claim('live-2', 'o', LEASE) // evicts the completion 'done'
    expect(await store.claim('live-1', 'x', LEASE)).toBe('in_flight')
    expect(await store.claim('live-2', 'x', LEASE)).toBe('in_flight')
    await store.claim('live-3', 'o', LEASE) // only claims left: the oldest goes
    expect(store.size).toBe(2)
    expect(await store.claim('live-3', 'x', LEASE)).toBe('in_flight')
  })

  it('holds 10 000 ids in a 1 000-entry store without growing past the bound', async () => {
    const { store } = clocked(1000)
    for (let i = 0; i < 10_000; i++) {
      await store.claim(`k${i}`, 'o', LEASE)
      await store.complete(`k${i}`, 'o', RETENTION)
    }
    expect(store.size).toBe(1000)
    expect(await store.claim('k9999', 'o', LEASE)).toBe('completed')
    expect(await store.claim('k0', 'o', LEASE)).toBe('claimed')
  })

  it.each([0, -1, 1.5, Number.NaN, Infinity])('rejects maxEntries %s at construction', (maxEntries) => {
    expect(() => new MemoryStore({ maxEntries })).toThrow(TypeError)
  })
})

it('MemoryStore starts no timer and no handle: a process using it can exit', async () => {
  const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate').length
  const store = new MemoryStore()
  await store.claim('t', 'o', LEASE)
  await store.complete('t', 'o', RETENTION)
  await store.claim('u', 'o', LEASE)
  const after = process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate').length
  expect(after).toBe(before)
  expect(store.size).toBe(2)
})

/**
 * The store's own hash index and ring against a plain model of the contract (a Map), over random
 * runs of claims, completions, releases and clock steps: the same answers, call for call. Keys
 * come from a pool larger than the ring's first size, so runs grow it, leave holes (releases,
 * expired entries taken over, completions repeated) and rebuild it.
 */
describe('MemoryStore: against a model of the contract', () => {
  type Op =
    | { kind: 'claim' | 'complete' | 'release'; key: number; owner: number; ms: number }
    | { kind: 'tick'; ms: number }
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constantFrom('claim', 'complete', 'release'), key: fc.nat(299), owner: fc.nat(3), ms: fc.integer({ min: 1, max: 5_000 }) }),
    fc.record({ kind: fc.constant('tick'), ms: fc.integer({ min: 0, max: 3_000 }) }),
  ) as fc.Arbitrary<Op>

  class Model {
    entries = new Map<string, { owner?: string; expiresAt: number }>()
    constructor(private readonly clock: { now: number }) {}
    claim(key: string, owner: string, leaseMs: number): string {
      const entry = this.entries.get(key)
      if (entry && entry.expiresAt > this.clock.now) return entry.owner === undefined ? 'completed' : 'in_flight'
      this.entries.set(key, { owner, expiresAt: this.clock.now + leaseMs })
      return 'claimed'
    }
    complete(key: string, owner: string, retentionMs: number): boolean {
      const entry = this.entries.get(key)
      this.entries.set(key, { expiresAt: Math.ceil((this.clock.now + retentionMs) / 1000) * 1000 })
      return entry?.owner === owner && entry.expiresAt > this.clock.now
    }
    release(key: string, owner: string): boolean {
      const entry = this.entries.get(key)
      if (entry?.owner === undefined || entry.owner !== owner || entry.expiresAt <= this.clock.now) return false
      this.entries.delete(key)
      return true
    }
  }

  /** A claim whose 1 ms lease ends, a claim of another key that sweeps it away (when `swept`), then `kind` by its owner. */
  const afterLease = (kind: 'complete' | 'release', swept: boolean): Op[] => [
    { kind: 'claim', key: 297, owner: 1, ms: 1 },
    { kind: 'tick', ms: 1 },
    ...(swept ? [{ kind: 'claim', key: 0, owner: 0, ms: 1 } as const] : []),
    { kind, key: 297, owner: 1, ms: 1 },
  ]

  it('answers as the model does when nothing is evicted', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 600 }), (ops) => {
        const clock = { now: 1_763_806_530_000 }
        const store = new MemoryStore({ now: () => clock.now, maxEntries: 10_000 })
        const model = new Model(clock)
        for (const o of ops) {
          if (o.kind === 'tick') clock.now += o.ms
          else expect(store[o.kind](`ep:${o.key}`, `owner-${o.owner}`, o.ms)).toEqual(model[o.kind](`ep:${o.key}`, `owner-${o.owner}`, o.ms))
        }
        // Whatever is left: every key answers a claim as the model does.
        for (let key = 0; key < 300; key++) expect(store.claim(`ep:${key}`, 'last', 1)).toBe(model.claim(`ep:${key}`, 'last', 1))
      }),
      // Found by random runs: a lease ends, another key's claim sweeps it away, then its owner
      // completes it, or releases it. The owner no longer held a live claim, swept yet or not:
      // false (the old store answered true when no sweep had run, false when one had). Each is
      // also run without the sweep: the expired claim is still there, and still not held.
      { numRuns: 300, examples: (['complete', 'release'] as const).flatMap((kind) => [[afterLease(kind, true)], [afterLease(kind, false)]]) },
    )
  })

  it('the index finds every key after any run of insertions and deletions, dense and wrapping', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat(2_999)), { minLength: 500, maxLength: 4_000 }), (ops) => {
        const store = new MemoryStore({ maxEntries: 3_000 })
        const held = new Set<number>()
        for (const [insert, id] of ops) {
          if (insert) {
            expect(store.claim(`k${id}`, 'o', LEASE)).toBe(held.has(id) ? 'in_flight' : 'claimed')
            held.add(id)
          } else {
            expect(store.release(`k${id}`, 'o')).toBe(held.delete(id))
          }
        }
        expect(store.size).toBe(held.size)
        for (let id = 0; id < 3_000; id++) expect(store.release(`k${id}`, 'o')).toBe(held.has(id))
      }),
      { numRuns: 60 },
    )
  })

  it('bounded: never holds more than maxEntries, and remembers the newest completions', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 150 }), fc.array(fc.nat(499), { minLength: 1, maxLength: 2_000 }), (maxEntries, ids) => {
        const store = new MemoryStore({ maxEntries })
        const completedOrder: string[] = []
        for (const id of ids) {
          const key = `ep:${id}`
          if (store.claim(key, 'o', LEASE) === 'claimed') {
            store.complete(key, 'o', RETENTION)
            completedOrder.push(key)
          }
          expect(store.size).toBeLessThanOrEqual(maxEntries)
        }
        // The last maxEntries distinct keys completed are all still known.
        const newest = [...new Set(completedOrder.reverse())].slice(0, maxEntries)
        for (const key of newest) expect(store.claim(key, 'x', LEASE)).toBe('completed')
      }),
      { numRuns: 200 },
    )
  })
})
