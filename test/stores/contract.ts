/**
 * The one IdempotencyStore contract (DESIGN.md "Answers, idempotency"), run against every store:
 * MemoryStore, RedisStore over ioredis and over node-redis, PostgresStore. Real time with short
 * leases (200 ms) and bounded polling: nothing asserts on how long anything took.
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createWebhookReceiver, type IdempotencyStore } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

export interface StoreUnderTest {
  store: IdempotencyStore
  /** The same backend under another namespace (prefix, table): keys must not collide. */
  isolated?: () => Promise<IdempotencyStore> | IdempotencyStore
  close(): Promise<void>
}

const SHORT_MS = 200
const SECRET = 'svc_whsec_contract'

/** Polls `check` every 50 ms, at most `tries` times, until it returns true. */
export async function eventually(check: () => Promise<boolean>, tries = 100): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return false
}

const key = () => `contract:${randomUUID()}`

/**
 * Registers the contract's tests in the current `describe`. `setup` runs once before them.
 *
 * @example
 * describe('MemoryStore', () => describeStoreContract(async () => ({ store: new MemoryStore(), close: async () => {} })))
 */
export function describeStoreContract(setup: () => Promise<StoreUnderTest>): void {
  let subject: StoreUnderTest
  beforeAll(async () => {
    subject = await setup()
  })
  afterAll(async () => {
    await subject?.close()
  })

  it('claims a fresh id once; another owner then finds it in flight', async () => {
    const k = key()
    expect(await subject.store.claim(k, 'a', 60_000)).toBe('claimed')
    expect(await subject.store.claim(k, 'b', 60_000)).toBe('in_flight')
  })

  it('after the owner completes, every claim finds it completed', async () => {
    const k = key()
    await subject.store.claim(k, 'a', 60_000)
    expect(await subject.store.complete(k, 'a', 60_000)).toBe(true)
    expect(await subject.store.claim(k, 'b', 60_000)).toBe('completed')
    expect(await subject.store.claim(k, 'a', 60_000)).toBe('completed')
    expect(await subject.store.release(k, 'a')).toBe(false)
    expect(await subject.store.claim(k, 'c', 60_000)).toBe('completed')
  })

  it('the owner releases the id so the next claim runs it', async () => {
    const k = key()
    await subject.store.claim(k, 'a', 60_000)
    expect(await subject.store.release(k, 'a')).toBe(true)
    expect(await subject.store.claim(k, 'b', 60_000)).toBe('claimed')
  })

  it('only the owner may release a live claim', async () => {
    const k = key()
    await subject.store.claim(k, 'a', 60_000)
    expect(await subject.store.release(k, 'b')).toBe(false)
    expect(await subject.store.claim(k, 'c', 60_000)).toBe('in_flight')
  })

  it('a lease expires, so a crashed owner does not block the id; the stale owner can then neither release nor complete as owner', async () => {
    const k = key()
    expect(await subject.store.claim(k, 'stale', SHORT_MS)).toBe('claimed')
    expect(await subject.store.claim(k, 'next', 60_000)).toBe('in_flight')
    expect(await eventually(async () => (await subject.store.claim(k, 'next', 60_000)) === 'claimed')).toBe(true)
    expect(await subject.store.release(k, 'stale')).toBe(false)
    expect(await subject.store.claim(k, 'third', 60_000)).toBe('in_flight')
    // The stale owner's work did finish: the completion is recorded, but it is told it lost the claim.
    expect(await subject.store.complete(k, 'stale', 60_000)).toBe(false)
    expect(await subject.store.claim(k, 'third', 60_000)).toBe('completed')
    expect(await subject.store.release(k, 'next')).toBe(false)
  })

  it('a lease that ended with nobody taking over is no longer its owner\'s to release', async () => {
    const k = key()
    expect(await subject.store.claim(k, 'stale', SHORT_MS)).toBe('claimed')
    // Past the lease, without a claim that would take it over (a memory store sweeps only on a claim).
    await new Promise((resolve) => setTimeout(resolve, SHORT_MS + 100))
    expect(await subject.store.release(k, 'stale')).toBe(false)
    expect(await subject.store.claim(k, 'next', 60_000)).toBe('claimed')
  })

  it('a completion is forgotten after the retention window', async () => {
    const k = key()
    await subject.store.claim(k, 'a', 60_000)
    await subject.store.complete(k, 'a', SHORT_MS)
    expect(await subject.store.claim(k, 'b', 60_000)).toBe('completed')
    expect(await eventually(async () => (await subject.store.claim(k, 'b', 60_000)) === 'claimed')).toBe(true)
  })

  it('50 concurrent claims of one id: exactly one is claimed, the rest in flight', async () => {
    const k = key()
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => subject.store.claim(k, `owner-${i}`, 60_000)))
    expect(results.filter((r) => r === 'claimed')).toHaveLength(1)
    expect(results.filter((r) => r === 'in_flight')).toHaveLength(49)
  })

  it('distinct ids do not interfere', async () => {
    const [k1, k2] = [key(), key()]
    await subject.store.claim(k1, 'a', 60_000)
    await subject.store.complete(k1, 'a', 60_000)
    expect(await subject.store.claim(k2, 'a', 60_000)).toBe('claimed')
  })

  it('the store namespace (prefix, table) isolates two stores on one backend', async (ctx) => {
    if (subject.isolated === undefined) return ctx.skip('this store has no namespace of its own; endpoint namespacing is tested below')
    const other = await subject.isolated()
    const k = key()
    await subject.store.claim(k, 'a', 60_000)
    await subject.store.complete(k, 'a', 60_000)
    expect(await other.claim(k, 'b', 60_000)).toBe('claimed')
  })

  it('through receivers sharing the store: concurrent copies of a delivery run the handler once; another endpoint runs it too', async () => {
    const runs: string[] = []
    const on = (label: string) => ({
      'message.received': async () => {
        await new Promise((resolve) => setTimeout(resolve, 50))
        runs.push(label)
      },
    })
    const a1 = createWebhookReceiver({ secret: SECRET, store: subject.store, endpoint: 'a', on: on('a') })
    const a2 = createWebhookReceiver({ secret: SECRET, store: subject.store, endpoint: 'a', on: on('a') })
    const b = createWebhookReceiver({ secret: SECRET, store: subject.store, endpoint: 'b', on: on('b') })
    const event = sampleEvent('message.received')
    const id = randomUUID()
    const copies = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const signed = await signWebhook({ secret: SECRET, event, id })
        return (i % 2 ? a1 : a2).handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
      }),
    )
    const statuses = copies.map((c) => c.status)
    expect(statuses.filter((s) => s === 200)).not.toHaveLength(0)
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true)
    const later = await signWebhook({ secret: SECRET, event, id })
    const again = await a1.handle({ method: 'POST', body: later.rawBody, headers: later.headers })
    expect(again.status).toBe(200)
    expect(JSON.parse(again.body)).toMatchObject({ duplicate: true })
    const other = await b.handle({ method: 'POST', body: later.rawBody, headers: later.headers })
    expect(other.status).toBe(200)
    expect(runs.sort()).toEqual(['a', 'b'])
  })

  it('a handler that outlasts the lease: the next copy may run it too, and the first completion is reported through onResult', async () => {
    const runs: string[] = []
    const results: { outcome: string; error?: unknown }[] = []
    let unblock!: () => void
    const blocked = new Promise<void>((resolve) => (unblock = resolve))
    const receiver = createWebhookReceiver({
      secret: SECRET,
      store: subject.store,
      endpoint: `lease-${randomUUID()}`,
      leaseMs: SHORT_MS,
      on: {
        'message.received': async () => {
          const first = runs.length === 0
          runs.push(first ? 'slow' : 'next')
          if (first) await blocked
        },
      },
      onResult: (result) => void results.push(result),
    })
    const event = sampleEvent('message.received')
    const id = randomUUID()
    const send = async () => {
      const signed = await signWebhook({ secret: SECRET, event, id })
      return receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    }
    const slow = send()
    // Copies go out only once the slow one runs: a copy that claimed first would block itself.
    expect(await eventually(async () => runs.length === 1)).toBe(true)
    expect(await eventually(async () => (await send()).status === 200 && runs.includes('next'))).toBe(true)
    unblock()
    expect((await slow).status).toBe(200)
    expect(runs).toEqual(['slow', 'next'])
    const late = results.find((r) => r.outcome === 'processed' && r.error !== undefined)
    expect(String((late?.error as Error | undefined)?.message)).toContain('leaseMs')
  })
}
