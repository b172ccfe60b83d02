/**
 * createQueueConsumer's options, checked when it is created (the consumer itself runs in workerd
 * in cloudflare-queue.test.ts): the handler deadline never outlasts the claim, and a short
 * `leaseMs` given alone shortens the default deadline rather than being refused; an `on` key that
 * is no event type is warned about once, at creation.
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

  it('warns once, at creation, about an `on` key that is no event type; a valid `on` writes nothing', () => {
    const lines: string[] = []
    createQueueConsumer({ on: { 'message.recieved': () => {} } as never, store: new MemoryStore(), log: (line) => void lines.push(line) })
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain('"message.recieved"')
    expect(lines[0]).toContain('Did you mean "message.received"?')
    const quiet: string[] = []
    createQueueConsumer({ on, store: new MemoryStore(), log: (line) => void quiet.push(line) })
    expect(quiet).toEqual([])
  })
})
