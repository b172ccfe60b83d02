/**
 * An inbox given `ordering` (DESIGN.md "Order within a conversation"): receivers file each
 * delivery under its key and order as they append it, and an ordered take places what was filed
 * itself, in its own round trip, instead of handing the bodies to a worker. On MemoryInbox and on
 * RedisInbox against a real redis-server (PostgresInbox: test/inbox/ordering-postgres.test.ts).
 * The rules under any arrival and failure pattern are the filed properties in
 * ordering-memory.test.ts and ordering-redis.test.ts; the multi-process run with kill -9 is in
 * ordering-processes.test.ts.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { MemoryInbox, byConversation, createInboxWorker, createWebhookReceiver, type InboxDelivery, type OrderingEngine, type WebhookInbox } from 'svc-webhooks'
import { RedisInbox } from 'svc-webhooks/redis'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithRedis } from '../support/services.js'
import { useRedisServer } from '../support/redis.js'
import { messageBody } from '../../tools/order/run.mjs'

const SECRET = 'svc_whsec_OrderingFiledTestSecret'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function delivery(id: string, c: number, index: number, receivedAt = Date.now()): InboxDelivery {
  return { keys: [`default:${id}`], endpoint: 'default', id, timestamp: Math.floor(receivedAt / 1000), signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(c, index), receivedAt }
}

const take = (inbox: OrderingEngine, filed: boolean) => inbox.takeOrdered(10, 5000, { placeLeaseMs: 5000, poke: [], ...(filed && { filed: { strict: true } }) })

/**
 * What every engine does with filed deliveries: an ordered take of a worker whose ordering is the
 * inbox's places them and hands out the head of each key, never a body to place; a take without
 * `filed` ignores the filings and hands every delivery out to be placed.
 */
function filedContract(name: string, open: (ordering: boolean) => WebhookInbox & OrderingEngine) {
  it(`${name}: a take places what was filed and runs each conversation's oldest, handing nothing out to place`, async () => {
    const inbox = open(true)
    // Arrived newest first, as the sender's retries may deliver them.
    for (const [id, c, index] of [['a2', 0, 2], ['b1', 1, 1], ['a0', 0, 0], ['a1', 0, 1], ['b0', 1, 0]] as const) await inbox.append(delivery(id, c, index))
    const first = await take(inbox, true)
    expect(first.place).toEqual([])
    expect(first.run.map((entry) => entry.id).sort()).toEqual(['a0', 'b0'])
    expect(first.run.every((entry) => entry.late === false)).toBe(true)
  })

  it(`${name}: a take without \`filed\` ignores the filings and hands every delivery out to be placed`, async () => {
    const inbox = open(true)
    for (const [id, index] of [['a1', 1], ['a0', 0]] as const) await inbox.append(delivery(id, 0, index))
    const taken = await take(inbox, false)
    // A delivery handed out to be placed carries what placing reads: its primary key, not its id.
    expect(taken.place.map((entry) => entry.keys[0]).sort()).toEqual(['default:a0', 'default:a1'])
    expect(taken.run).toEqual([])
  })

  it(`${name}: an unfiled delivery (appended without ordering) holds every head until a worker places it`, async () => {
    const filing = open(true)
    await filing.append(delivery('a1', 0, 1))
    await open(false).append(delivery('a0', 0, 0))
    const first = await take(filing, true)
    expect(first.place.map((entry) => entry.keys[0])).toEqual(['default:a0'])
    expect(first.run).toEqual([])
  })
}

describe('an inbox with `ordering`: options', () => {
  it('a worker takes the ordering from its inbox, and refuses one that differs', () => {
    const inbox = new MemoryInbox({ ordering: byConversation })
    expect(inbox.ordering).toEqual({ key: byConversation, strict: true })
    expect(() => createInboxWorker({ inbox, on: {}, log: false })).not.toThrow()
    expect(() => createInboxWorker({ inbox, ordering: byConversation, on: {}, log: false })).not.toThrow()
    expect(() => createInboxWorker({ inbox, ordering: { key: byConversation, strict: false }, on: {}, log: false })).toThrow(/differs from its inbox's `ordering`/)
    expect(() => createInboxWorker({ inbox, ordering: (event) => event.event, on: {}, log: false })).toThrow(/differs from its inbox's `ordering`/)
  })

  it('an inbox `ordering` that is not a key function is a TypeError naming the inbox', () => {
    expect(() => new MemoryInbox({ ordering: 'conversation_id' as never })).toThrow(/MemoryInbox `ordering` must be a key function/)
    expect(() => new MemoryInbox({ ordering: { key: byConversation, strict: 'yes' as never } })).toThrow(/MemoryInbox `ordering.strict` must be a boolean/)
  })

  it('the receiver files each delivery at append from the event it parsed; without ordering it files none', async () => {
    for (const ordering of [true, false]) {
      const inbox = new MemoryInbox(ordering ? { ordering: byConversation } : {})
      const appended: InboxDelivery[] = []
      const append = inbox.append.bind(inbox)
      inbox.append = (d) => (appended.push(d), append(d))
      const receiver = createWebhookReceiver({ secret: SECRET, inbox, on: { 'message.received': () => undefined } })
      const event = sampleEvent('message.received')
      event.conversation_id = 'conv-42'
      event.message.created_at = '2026-05-01T10:00:00.123456+00:00'
      const signed = await signWebhook({ secret: SECRET, event, id: `evt-${ordering}` })
      expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(202)
      if (!ordering) {
        expect(appended[0]!.filed).toBeUndefined()
        continue
      }
      // created_at in microseconds, then the time received: the order a worker would compute.
      expect(appended[0]!.filed).toEqual({ key: 'conv-42', order: `${String(Date.UTC(2026, 4, 1, 10) * 1000 + 123456).padStart(17, '0')}.${String(appended[0]!.receivedAt).padStart(15, '0')}` })
    }
  })

  it('a key function that throws files nothing: a worker places the delivery, and its run fails with the reason until dead-lettered', async () => {
    const throwing = () => {
      throw new Error('no key')
    }
    const inbox = new MemoryInbox({ ordering: throwing })
    await inbox.append(delivery('k0', 0, 0))
    const worker = createInboxWorker({ inbox, on: { 'message.received': () => undefined }, log: false, maxRetryAgeMs: 50, firstRetryDelayMs: 1, maxRetryDelayMs: 5, pollIntervalMs: 2 })
    worker.start()
    for (let waited = 0; waited < 5000 && (await inbox.dead(10)).length === 0; waited += 10) await sleep(10)
    await worker.stop(1000)
    const [letter] = await inbox.dead(10)
    expect(letter?.lastError).toMatch(/ordering key function threw/)
  })
})

describe('filed deliveries on MemoryInbox', () => {
  let last: MemoryInbox | undefined
  filedContract('MemoryInbox', (ordering) => {
    if (ordering) return (last = new MemoryInbox({ ordering: byConversation }))
    // The same memory without `ordering`: a receiver that does not file.
    return Object.create(last!, { ordering: { value: undefined } }) as MemoryInbox
  })
})

describeWithRedis('filed deliveries on RedisInbox', () => {
  const redis = useRedisServer()
  let prefix = ''
  // A fresh inbox with `ordering`; one without on the same keys (a receiver that does not file).
  const open = (ordering: boolean) => {
    if (ordering) prefix = `filed-${randomUUID()}:`
    return new RedisInbox({ client: redis.client, prefix, ...(ordering && { ordering: byConversation }) })
  }
  filedContract('RedisInbox', open)

  it('RedisInbox: past the bound of one take (2,000 due), the take says "more", and no head runs before the rest is placed', async () => {
    const inbox = open(true)
    const now = Date.now()
    // Conversation 0's oldest arrives last, past the bound: its newer message must not run first.
    await inbox.append(delivery('c0-1', 0, 1, now))
    const others = Array.from({ length: 2100 }, (_, i) => delivery(`m${i}`, 1 + (i % 50), i, now))
    for (let i = 0; i < others.length; i += 300) await Promise.all(others.slice(i, i + 300).map((d) => inbox.append(d)))
    await sleep(2)
    await inbox.append(delivery('c0-0', 0, 0, now))
    expect(await take(inbox, true)).toMatchObject({ place: [], run: [], more: true })
    const heads: string[] = []
    for (let round = 0; round < 10 && !heads.some((id) => id.startsWith('c0-')); round++) {
      const taken = await inbox.takeOrdered(60, 5000, { placeLeaseMs: 5000, poke: [], filed: { strict: true } })
      expect(taken.place).toEqual([])
      heads.push(...taken.run.map((entry) => entry.id))
    }
    expect(heads.filter((id) => id.startsWith('c0-'))).toEqual(['c0-0'])
  })
})
