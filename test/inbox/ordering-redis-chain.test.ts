/**
 * RedisInbox's `completeNext` against a real redis-server: completing a head leases the next head
 * of its key to the caller in the same script, only when a take would lease it now (not paused,
 * nothing unplaced, not a suspect); a repeat after a lost reply brings back the same head; `chain: false` only
 * completes and the key is taken at once. An ordered worker goes through a conversation by these
 * completions, 16 in a row, and on across a kill -9 and restart of its server right after a
 * chained message ran. The same rules on Postgres: ordering-postgres-chain.test.ts.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { expect, it } from 'vitest'
import { RedisInbox } from 'svc-webhooks/redis'
import { byConversation, type OrderedEntry, type OrderedTake } from 'svc-webhooks'
import { describeWithRedis } from '../support/services.js'
import { useRedisServer } from '../support/redis.js'
import { messageBody } from '../../tools/order/run.mjs'
import { delivery } from './support/ordering-run.js'
import { chainThrough, raceWithTakes, restartMidChain, workerChainsSixteen } from './support/chain-cases.js'
import { startRedisServer } from '../../tools/redis.mjs'

const filed = { placeLeaseMs: 5_000, poke: [], filed: { strict: true } }

describeWithRedis('RedisInbox.completeNext: a completion leases the next head of its key', () => {
  const redis = useRedisServer()

  /** An inbox filing by conversation, with messages 0..count-1 of conversation 1 appended, newest first. */
  async function conversation(count: number): Promise<{ inbox: RedisInbox; prefix: string }> {
    const prefix = `{chain-${randomUUID()}}:`
    const inbox = new RedisInbox({ client: redis.client, prefix, ordering: byConversation })
    for (let index = count - 1; index >= 0; index--) await inbox.append(delivery(`d${index}-1`, messageBody(1, index), Date.now()))
    return { inbox, prefix }
  }
  /** The one head an ordered take hands out (placing what was filed first). */
  async function head(inbox: RedisInbox): Promise<OrderedEntry> {
    let taken: OrderedTake = await inbox.takeOrdered(5, 60_000, filed)
    for (let i = 0; i < 5 && taken.run.length === 0; i++) taken = await inbox.takeOrdered(5, 60_000, filed)
    expect(taken.run).toHaveLength(1)
    return taken.run[0]!
  }

  it('hands each next head to the completion of the one before, in order, until the key is empty', async () => {
    const { inbox } = await conversation(4)
    await chainThrough(inbox, await head(inbox), 4)
  })

  it('a completion and four takes at once: the next head goes to one of them, 10 times', async () => {
    for (let round = 0; round < 10; round++) {
      const { inbox } = await conversation(3)
      const first = await head(inbox)
      await raceWithTakes(inbox, first, () => inbox.takeOrdered(5, 60_000, { ...filed, poke: [first.orderKey] }))
    }
  })

  it('a repeat of the same completion (its reply lost) brings back the same next head; another lease gets nothing', async () => {
    const { inbox } = await conversation(3)
    const first = await head(inbox)
    const once = await inbox.completeNext(first, 60_000, true)
    const again = await inbox.completeNext(first, 60_000, true)
    expect(once.next?.id).toBe('d1-1')
    expect(again).toEqual(once)
    expect(await inbox.completeNext({ ...first, lease: 'another' }, 60_000, true)).toEqual({ done: false })
    // The head is held: a take hands out nothing more of the key.
    expect((await inbox.takeOrdered(5, 60_000, filed)).run).toEqual([])
  })

  it('no next head while the inbox is paused, and the key is taken at once after', async () => {
    const { inbox } = await conversation(2)
    const first = await head(inbox)
    await inbox.setPause(true, 'test')
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    await inbox.setPause(false)
    expect((await head(inbox)).id).toBe('d1-1')
  })

  it('no next head while a delivery waits unplaced: it may come first', async () => {
    const { inbox } = await conversation(3)
    const first = await head(inbox)
    // Created with d0, received after it: before d1 and d2, and not placed yet (no take since).
    await inbox.append(delivery('d0.5-1', messageBody(1, 0), Date.now()))
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    expect((await head(inbox)).id).toBe('d0.5-1')
  })

  it('no next head that is a suspect (handed out before without a result): it runs alone, through a take', async () => {
    const { inbox, prefix } = await conversation(2)
    const first = await head(inbox)
    await redis.client.hset(`${prefix}e:default:d1-1`, 'takes', '1')
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    const second = await head(inbox)
    expect(second.id).toBe('d1-1')
    expect(second.takes).toBe(2)
  })

  it('`chain: false` completes only, as `complete` does: the key goes to the next take that pokes it', async () => {
    const { inbox } = await conversation(2)
    const first = await head(inbox)
    expect(await inbox.completeNext(first, 60_000, false)).toEqual({ done: true })
    const taken = await inbox.takeOrdered(5, 60_000, { ...filed, poke: [first.orderKey] })
    expect(taken.run.map((entry) => entry.id)).toEqual(['d1-1'])
  })

  it('an ordered worker goes through a conversation by its completions, 16 in a row, then its key goes back to the takes', async () => {
    await workerChainsSixteen((await conversation(40)).inbox)
  })

  it('redis-server killed (kill -9, appendfsync always) right after a chained message ran: its completion is retried across the restart, and the conversation runs on in order, each message once', { timeout: 60_000 }, async () => {
    const server = await startRedisServer({ persist: true })
    const client = new Redis(server.url)
    // The restart is reported by the inbox's own calls, not as an unhandled error.
    client.on('error', () => {})
    try {
      const inbox = new RedisInbox({ client, prefix: '{chain-restart}:', ordering: byConversation })
      for (let index = 7; index >= 0; index--) await inbox.append(delivery(`d${index}-1`, messageBody(1, index), Date.now()))
      await restartMidChain(inbox, server)
    } finally {
      client.disconnect()
      await server.stop()
    }
  })
})
