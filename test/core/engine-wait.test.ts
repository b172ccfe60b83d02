/**
 * The receiver's one wait for its store or inbox (`engineWaitMs`) and the bound on the requests
 * held in it (`maxHeld`), through the built `createWebhookReceiver().handle()` with stores and
 * inboxes whose answers the test holds back: each engine call gets the request's deadline, and a
 * request past the bound is answered 503 with Retry-After at once instead of joining the wait.
 */
import { describe, expect, it } from 'vitest'
import { createWebhookReceiver, MemoryStore, type AppendResult, type IdempotencyStore, type InboxDelivery } from 'svc-webhooks'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'

const SECRET = 'svc_whsec_EngineWaitTestSecret'

async function delivery(text = 'hello') {
  const event = sampleEvent('message.received')
  event.message.text = text
  const signed = await signWebhook({ secret: SECRET, event })
  return { method: 'POST', body: signed.rawBody, headers: signed.headers }
}

/** A MemoryStore whose claims wait until `open()`, recording each claim's and completion's deadline. */
function heldStore() {
  const memory = new MemoryStore()
  const waiting: (() => void)[] = []
  const deadlines: { call: string; deadline: number | undefined }[] = []
  const store: IdempotencyStore = {
    claim: (key, owner, leaseMs, deadline) => {
      deadlines.push({ call: 'claim', deadline })
      return new Promise((resolve) => waiting.push(() => resolve(memory.claim(key, owner, leaseMs) as never)))
    },
    complete: (key, owner, retentionMs, deadline) => {
      deadlines.push({ call: 'complete', deadline })
      return memory.complete(key, owner, retentionMs)
    },
    release: (key, owner) => memory.release(key, owner),
  }
  return { store, deadlines, open: () => waiting.splice(0).forEach((go) => go()), waiting: () => waiting.length }
}

describe('engineWaitMs: one deadline for the store and the inbox', () => {
  it('every claim and completion of a request carries the same deadline, engineWaitMs after verification', async () => {
    const { store, deadlines, open } = heldStore()
    const receiver = createWebhookReceiver({ secret: SECRET, store, engineWaitMs: 6000, on: { 'message.received': () => {} } })
    const before = Date.now()
    const answer = receiver.handle(await delivery())
    await new Promise((resolve) => setTimeout(resolve, 10))
    open()
    expect((await answer).status).toBe(200)
    expect(deadlines.map((d) => d.call)).toEqual(['claim', 'complete'])
    const [claim, complete] = deadlines
    expect(claim!.deadline).toBe(complete!.deadline)
    expect(claim!.deadline! - before).toBeGreaterThanOrEqual(6000)
    expect(claim!.deadline! - before).toBeLessThan(6500)
  })

  it('the inbox gets the deadline too (8 s by default), and inboxWaitMs is the same wait under its older name', async () => {
    const seen: (number | undefined)[] = []
    const inbox = { append: async (_d: InboxDelivery, deadline?: number): Promise<AppendResult> => (seen.push(deadline), 'accepted') }
    const before = Date.now()
    expect((await createWebhookReceiver({ secret: SECRET, inbox }).handle(await delivery())).status).toBe(202)
    expect((await createWebhookReceiver({ secret: SECRET, inbox, inboxWaitMs: 3000 }).handle(await delivery())).status).toBe(202)
    expect(seen[0]! - before).toBeGreaterThanOrEqual(8000)
    expect(seen[0]! - before).toBeLessThan(8500)
    expect(seen[1]! - before).toBeLessThan(3500)
  })

  it('is refused at creation outside 0 to 9000 ms, as maxHeld outside positive numbers', () => {
    const on = { 'message.received': () => {} }
    expect(() => createWebhookReceiver({ secret: SECRET, on, engineWaitMs: 9500 })).toThrow(/engineWaitMs.*9000/)
    expect(() => createWebhookReceiver({ secret: SECRET, on, maxHeld: { requests: 0 } })).toThrow(/maxHeld.requests/)
    expect(() => createWebhookReceiver({ secret: SECRET, on, maxHeld: { bytes: Number.NaN } })).toThrow(/maxHeld.bytes/)
  })
})

describe('maxHeld: the requests waiting for an engine are bounded', () => {
  it('past `requests`, a delivery is answered 503 store_unavailable with Retry-After at once; the held ones answer once the store does', async () => {
    const { store, open, waiting } = heldStore()
    const runs: string[] = []
    const receiver = createWebhookReceiver({ secret: SECRET, store, log: false, maxHeld: { requests: 2 }, on: { 'message.received': (_e, d) => void runs.push(d.id) } })
    const held = [receiver.handle(await delivery('a')), receiver.handle(await delivery('b'))]
    // Bounded: the two claims reach the store within a few turns.
    for (let i = 0; i < 100 && waiting() < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5))
    const started = Date.now()
    const third = await receiver.handle(await delivery('c'))
    expect(Date.now() - started).toBeLessThan(500)
    expect(third.status).toBe(503)
    expect(third.headers['retry-after']).toBe('5')
    expect(JSON.parse(third.body)).toEqual({ ok: false, code: 'store_unavailable' })
    open()
    expect((await Promise.all(held)).map((a) => a.status)).toEqual([200, 200])
    expect(runs).toHaveLength(2)
    // Freed: the next one waits its turn again instead of being refused.
    const fourth = receiver.handle(await delivery('d'))
    for (let i = 0; i < 100 && waiting() < 1; i++) await new Promise((resolve) => setTimeout(resolve, 5))
    open()
    expect((await fourth).status).toBe(200)
  })

  it('past `bytes`, an inbox delivery is answered 503 inbox_unavailable at once', async () => {
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => (release = resolve))
    const inbox = { append: async (): Promise<AppendResult> => (await gate, 'accepted') }
    const first = await delivery('x')
    const receiver = createWebhookReceiver({ secret: SECRET, inbox, log: false, maxHeld: { bytes: first.body.byteLength + 10 } })
    const held = receiver.handle(first)
    const second = await receiver.handle(await delivery('y'))
    expect(second.status).toBe(503)
    expect(JSON.parse(second.body)).toEqual({ ok: false, code: 'inbox_unavailable' })
    release()
    expect((await held).status).toBe(202)
  })
})
