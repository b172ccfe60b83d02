/**
 * MemoryStore, the single-process default: the store contract every store runs (contract.ts),
 * then what only MemoryStore has, against an injected clock: leases and owner tokens to the
 * millisecond, retention, the `maxEntries` bound, and no timer that keeps the process alive.
 */
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
