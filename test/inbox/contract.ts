/**
 * The inbox contract every engine must pass (src/contracts/inbox.ts): append dedupe by any key,
 * leases and their expiry, retry, bury, requeue and purge, retention, stats, raw bytes untouched,
 * no delivery taken twice by concurrent workers, acks idempotent per lease (a repeat answers
 * true, a stale lease false), takes counted at take, and a requeue that restores the whole retry
 * budget. Engines run it against their real backing service.
 *
 * @example
 * describeInboxContract('RedisInbox', async ({ retentionMs }) => new RedisInbox({ client, prefix: `t${n++}:`, retentionMs }))
 */
import { describe, expect, it } from 'vitest'
import type { InboxDelivery, WebhookInbox } from 'svc-webhooks'

export type InboxFactory = (options: { retentionMs: number }) => Promise<WebhookInbox>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let sequence = 0
const randomKey = () => `${process.pid}-${++sequence}-${Math.random().toString(36).slice(2)}`
/** A delivery with unique keys; its body holds bytes that are not UTF-8 text, to prove they survive. */
export function inboxDelivery(overrides: Partial<InboxDelivery> = {}): InboxDelivery {
  const id = `evt-${process.pid}-${++sequence}`
  return {
    keys: [`tenant:${id}`],
    endpoint: 'tenant',
    id,
    timestamp: 1_763_806_530,
    signatureVersion: 'v2',
    secretIndex: 0,
    rawBody: new Uint8Array([0x7b, 0x22, 0xc3, 0xa9, 0x00, 0xff, 0x22, 0x7d]),
    receivedAt: Date.now(),
    ...overrides,
  }
}

export function describeInboxContract(name: string, create: InboxFactory): void {
  describe(`inbox contract: ${name}`, () => {
    const fresh = (retentionMs = 60_000) => create({ retentionMs })

    it('append: accepted once; the same key again, or any of its keys, is a duplicate', async () => {
      const inbox = await fresh()
      const d = inboxDelivery({ keys: ['ep:a', 'ep:v1 replay-a'] })
      expect(await inbox.append(d)).toBe('accepted')
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.append(inboxDelivery({ keys: ['ep:other', 'ep:v1 replay-a'] }))).toBe('duplicate')
      expect(await inbox.append(inboxDelivery({ keys: ['ep:b'] }))).toBe('accepted')
      expect((await inbox.stats()).depth).toBe(2)
    })

    it('take: the delivery with its raw bytes untouched, attempts 0 and a lease; a leased delivery is not taken again', async () => {
      const inbox = await fresh()
      const d = inboxDelivery()
      await inbox.append(d)
      const [entry, ...rest] = await inbox.take(10, 10_000)
      expect(rest).toEqual([])
      expect(entry).toMatchObject({ keys: d.keys, endpoint: d.endpoint, id: d.id, timestamp: d.timestamp, signatureVersion: 'v2', secretIndex: 0, attempts: 0, takes: 1, retriesSince: d.receivedAt })
      expect([...entry!.rawBody]).toEqual([...d.rawBody])
      expect(typeof entry!.lease).toBe('string')
      expect(await inbox.take(10, 10_000)).toEqual([])
    })

    it('traceparent: kept with the delivery and handed out with it (the worker\'s span joins the receive span\'s trace); absent stays absent', async () => {
      const inbox = await fresh()
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
      await inbox.append(inboxDelivery({ keys: ['ep:traced'], traceparent }))
      await inbox.append(inboxDelivery({ keys: ['ep:untraced'] }))
      const entries = await inbox.take(10, 10_000)
      const byKey = Object.fromEntries(entries.map((entry) => [entry.keys[0], entry]))
      expect(byKey['ep:traced']!.traceparent).toBe(traceparent)
      expect(byKey['ep:untraced']!.traceparent).toBeUndefined()
    })

    it('complete: the delivery leaves the inbox and its keys stay processed (a resend is a duplicate)', async () => {
      const inbox = await fresh()
      const d = inboxDelivery()
      await inbox.append(d)
      const [entry] = await inbox.take(1, 10_000)
      expect(await inbox.complete(entry!)).toBe(true)
      expect(await inbox.take(10, 10_000)).toEqual([])
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.stats()).toMatchObject({ depth: 0, retrying: 0, dead: 0, oldestAgeMs: 0 })
    })

    it('retention: processed keys are forgotten after retentionMs', async () => {
      const inbox = await fresh(200)
      const d = inboxDelivery()
      await inbox.append(d)
      const [entry] = await inbox.take(1, 10_000)
      await inbox.complete(entry!)
      await sleep(400)
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('accepted')
    })

    it('retry: due again after the delay, with attempts + 1 and the error kept', async () => {
      const inbox = await fresh()
      await inbox.append(inboxDelivery())
      const [first] = await inbox.take(1, 10_000)
      expect(await inbox.retry(first!, 300, 'Error: database down')).toBe(true)
      expect(await inbox.take(1, 10_000)).toEqual([])
      expect((await inbox.stats()).retrying).toBe(1)
      await sleep(450)
      const [second] = await inbox.take(1, 10_000)
      expect(second).toMatchObject({ id: first!.id, attempts: 1, lastError: 'Error: database down' })
      expect(second!.lease).not.toBe(first!.lease)
    })

    it('an expired lease makes the delivery due again; the old holder can no longer complete it', async () => {
      const inbox = await fresh()
      await inbox.append(inboxDelivery())
      const [crashed] = await inbox.take(1, 150)
      await sleep(300)
      const [takeover] = await inbox.take(1, 10_000)
      expect(takeover!.id).toBe(crashed!.id)
      expect(await inbox.complete(crashed!)).toBe(false)
      expect(await inbox.retry(crashed!, 0, 'late')).toBe(false)
      expect(await inbox.complete(takeover!)).toBe(true)
    })

    it('extend keeps a slow handler\'s delivery hidden', async () => {
      const inbox = await fresh()
      await inbox.append(inboxDelivery())
      const [entry] = await inbox.take(1, 200)
      for (let i = 0; i < 3; i++) {
        await sleep(100)
        expect(await inbox.extend(entry!, 200)).toBe(true)
      }
      expect(await inbox.take(1, 10_000)).toEqual([])
      expect(await inbox.complete(entry!)).toBe(true)
    })

    it('bury: listed in dead() with its last error; requeue puts it back with attempts reset', async () => {
      const inbox = await fresh()
      const d = inboxDelivery()
      await inbox.append(d)
      const [entry] = await inbox.take(1, 10_000)
      expect(await inbox.bury(entry!, 'Error: gave up')).toBe(true)
      expect(await inbox.take(1, 10_000)).toEqual([])
      const dead = await inbox.dead()
      expect(dead).toHaveLength(1)
      expect(dead[0]).toMatchObject({ id: d.id, keys: d.keys, lastError: 'Error: gave up', attempts: 1, takes: 1 })
      expect([...dead[0]!.rawBody]).toEqual([...d.rawBody])
      expect(await inbox.stats()).toMatchObject({ depth: 0, dead: 1 })
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.requeue(d.keys[0]!)).toBe(true)
      expect(await inbox.requeue(d.keys[0]!)).toBe(false)
      const [again] = await inbox.take(1, 10_000)
      expect(again).toMatchObject({ id: d.id, attempts: 0 })
      expect(await inbox.stats()).toMatchObject({ depth: 1, dead: 0 })
    })

    it('acks are idempotent per lease: complete, retry and bury repeated by the same lease answer true; another lease gets false', async () => {
      const inbox = await fresh()
      const [a, b, c] = [inboxDelivery(), inboxDelivery(), inboxDelivery()]
      for (const d of [a, b, c]) await inbox.append(d)
      const taken = await inbox.take(3, 10_000)
      const byId = (id: string) => taken.find((entry) => entry.id === id)!
      expect(await inbox.complete(byId(a.id))).toBe(true)
      expect(await inbox.complete(byId(a.id))).toBe(true)
      expect(await inbox.retry(byId(b.id), 60_000, 'Error: once')).toBe(true)
      expect(await inbox.retry(byId(b.id), 60_000, 'Error: once')).toBe(true)
      expect(await inbox.bury(byId(c.id), 'Error: gave up')).toBe(true)
      expect(await inbox.bury(byId(c.id), 'Error: gave up')).toBe(true)
      // The repeats changed nothing: one attempt recorded, one dead letter.
      expect(await inbox.stats()).toMatchObject({ depth: 1, retrying: 1, dead: 1 })
      expect((await inbox.dead()).map((letter) => letter.attempts)).toEqual([1])
      // An ack is idempotent for its own kind only, and never for a lease that did not make it.
      expect(await inbox.bury(byId(a.id), 'x')).toBe(false)
      expect(await inbox.complete(byId(b.id))).toBe(false)
      expect(await inbox.complete({ ...byId(c.id), lease: `${byId(c.id).lease}-other` })).toBe(false)
    })

    it('takes: counted at each hand-out, a lapsed lease included; attempts count recorded results only', async () => {
      const inbox = await fresh()
      await inbox.append(inboxDelivery())
      const [first] = await inbox.take(1, 100)
      expect(first).toMatchObject({ attempts: 0, takes: 1 })
      await sleep(250)
      // The holder died without a result: the next take says so (takes - attempts - 1 = 1).
      const [second] = await inbox.take(1, 10_000)
      expect(second).toMatchObject({ attempts: 0, takes: 2 })
      expect(await inbox.retry(second!, 0, 'Error: once')).toBe(true)
      await sleep(20)
      const [third] = await inbox.take(1, 10_000)
      expect(third).toMatchObject({ attempts: 1, takes: 3, lastError: 'Error: once' })
      expect(new Set([first!.lease, second!.lease, third!.lease]).size).toBe(3)
      expect(await inbox.bury(third!, 'Error: gave up')).toBe(true)
      expect((await inbox.dead())[0]).toMatchObject({ attempts: 2, takes: 3 })
    })

    it('requeue gives a dead letter a full retry budget: attempts and takes reset, retriesSince now', async () => {
      const inbox = await fresh()
      const d = inboxDelivery({ receivedAt: Date.now() - 3_600_000 })
      await inbox.append(d)
      const [entry] = await inbox.take(1, 10_000)
      expect(entry!.retriesSince).toBe(d.receivedAt)
      await inbox.bury(entry!, 'Error: gave up')
      const before = Date.now()
      expect(await inbox.requeue(d.keys[0]!)).toBe(true)
      const [again] = await inbox.take(1, 10_000)
      expect(again).toMatchObject({ id: d.id, attempts: 0, takes: 1, receivedAt: d.receivedAt })
      expect(again).not.toHaveProperty('lastError')
      // The engine's clock (Redis TIME, Postgres now()) may differ a little from this process's.
      expect(again!.retriesSince).toBeGreaterThanOrEqual(before - 1_000)
      expect(again!.retriesSince).toBeLessThan(before + 60_000)
    })

    it('purge deletes a dead letter for good; its keys stay processed, so a resend is a duplicate', async () => {
      const inbox = await fresh()
      const d = inboxDelivery({ keys: [`ep:${randomKey()}`, `ep:v1 ${randomKey()}`] })
      const waiting = inboxDelivery()
      await inbox.append(d)
      const [entry] = await inbox.take(1, 10_000)
      await inbox.bury(entry!, 'Error: gave up')
      await inbox.append(waiting)
      expect(await inbox.purge(waiting.keys[0]!)).toBe(false)
      expect(await inbox.purge(d.keys[0]!)).toBe(true)
      expect(await inbox.purge(d.keys[0]!)).toBe(false)
      expect(await inbox.dead()).toEqual([])
      expect(await inbox.requeue(d.keys[0]!)).toBe(false)
      expect(await inbox.stats()).toMatchObject({ depth: 1, dead: 0 })
      expect(await inbox.append({ ...d, receivedAt: Date.now() })).toBe('duplicate')
      expect(await inbox.append(inboxDelivery({ keys: [d.keys[1]!] }))).toBe('duplicate')
    })

    it('stats: depth and the oldest waiting delivery\'s age', async () => {
      const inbox = await fresh()
      await inbox.append(inboxDelivery({ receivedAt: Date.now() - 5_000 }))
      await inbox.append(inboxDelivery())
      const stats = await inbox.stats()
      expect(stats.depth).toBe(2)
      expect(stats.oldestAgeMs).toBeGreaterThanOrEqual(4_000)
      expect(stats.oldestAgeMs).toBeLessThan(60_000)
    })

    it('five workers taking at once never get the same delivery twice', async () => {
      const inbox = await fresh()
      const ids = Array.from({ length: 60 }, () => inboxDelivery())
      for (const d of ids) await inbox.append(d)
      const seen: string[] = []
      await Promise.all(
        Array.from({ length: 5 }, async () => {
          for (let round = 0; round < 40; round++) {
            const entries = await inbox.take(4, 10_000)
            if (entries.length === 0) return
            for (const entry of entries) {
              seen.push(entry.id)
              await inbox.complete(entry)
            }
          }
        }),
      )
      expect(seen.sort()).toEqual(ids.map((d) => d.id).sort())
    })
  })
}
