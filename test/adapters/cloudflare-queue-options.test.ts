/**
 * createQueueConsumer's options, checked when it is created (the consumer itself runs in workerd
 * in cloudflare-queue.test.ts): the handler deadline never outlasts the claim, and a short
 * `leaseMs` given alone shortens the default deadline rather than being refused.
 */
import { describe, expect, it } from 'vitest'
import { MemoryStore } from 'svc-webhooks'
import { createQueueConsumer } from 'svc-webhooks/cloudflare'

const on = { 'message.received': () => {} }

describe('createQueueConsumer options', () => {
  it('a leaseMs shorter than the default deadline, given alone, is accepted', () => {
    expect(typeof createQueueConsumer({ on, store: new MemoryStore(), leaseMs: 60_000 })).toBe('function')
  })

  it('refuses a handlerTimeoutMs longer than leaseMs, or not positive', () => {
    expect(() => createQueueConsumer({ on, store: new MemoryStore(), leaseMs: 60_000, handlerTimeoutMs: 120_000 })).toThrow(/handlerTimeoutMs.*leaseMs/)
    expect(() => createQueueConsumer({ on, store: new MemoryStore(), handlerTimeoutMs: 0 })).toThrow(TypeError)
  })
})
