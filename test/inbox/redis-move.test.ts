/**
 * Upgrading a RedisInbox from the default prefix without a hash tag (`svc-webhooks:inbox:`,
 * before 0.2.0) to the tagged one, on a real redis-server: the deliveries waiting under the old
 * prefix are reported by `durabilityWarnings()` (the worker logs it at start), and
 * `moveRedisInboxPrefix` moves every key (waiting, dead, dedupe records with their expiry), merging
 * what receivers on the new version already appended, so nothing accepted is stranded and a resend
 * of a processed delivery stays a duplicate.
 */
import { randomUUID } from 'node:crypto'
import { expect, it } from 'vitest'
import { RedisInbox, moveRedisInboxPrefix } from 'svc-webhooks/redis'
import { describeWithRedis } from '../support/services.js'
import { useRedisServer } from '../support/redis.js'
import { textDelivery } from './worker-faults.js'

describeWithRedis('RedisInbox: moving from the untagged default prefix', () => {
  const redis = useRedisServer()

  it('warns about deliveries left under the old prefix, then moves them all: processed once, dead letters kept, resends still duplicates', async () => {
    const old = new RedisInbox({ client: redis.client, prefix: 'svc-webhooks:inbox:' })
    const processed = textDelivery('processed before the upgrade')
    const waiting = textDelivery('waiting at the upgrade')
    const dead = textDelivery('dead at the upgrade')
    for (const d of [processed, waiting, dead]) expect(await old.append(d)).toBe('accepted')
    // Taken together and told apart by id: appends within one millisecond are due at the same
    // time, and a take does not promise their order.
    const before = await old.take(3, 60_000)
    expect(before.map((e) => e.id).sort()).toEqual([processed.id, waiting.id, dead.id].sort())
    const byId = (id: string) => before.find((e) => e.id === id)!
    expect(await old.complete(byId(processed.id))).toBe(true)
    const toBury = byId(dead.id)
    const toGiveBack = byId(waiting.id)
    expect(await old.bury(toBury, 'failed before the upgrade')).toBe(true)
    expect(await old.retry(toGiveBack, 0, 'given back before the upgrade')).toBe(true)

    const tagged = new RedisInbox({ client: redis.client })
    expect(tagged.prefix).toBe('{svc-webhooks:inbox}:')
    // A receiver on the new version accepted one delivery before the move: it is merged, not lost.
    const fresh = textDelivery('accepted by the new version')
    expect(await tagged.append(fresh)).toBe('accepted')
    const warnings = await tagged.durabilityWarnings()
    expect(warnings.some((line) => /1 delivery\(ies\) and 1 dead letter\(s\) wait under the prefix "svc-webhooks:inbox:".*moveRedisInboxPrefix/.test(line))).toBe(true)

    const ttlBefore = Number(await redis.client.pttl(`svc-webhooks:inbox:k:${processed.keys[0]}`))
    const moved = await moveRedisInboxPrefix({ client: redis.client, batch: 2 })
    expect(moved.moved + moved.merged).toBeGreaterThan(0)
    expect(await redis.client.keys('svc-webhooks:inbox:*')).toEqual([])
    expect((await tagged.durabilityWarnings()).some((line) => /wait under the prefix/.test(line))).toBe(false)
    // The dedupe record kept its expiry: a resend of the processed delivery is still a duplicate.
    const ttlAfter = Number(await redis.client.pttl(`{svc-webhooks:inbox}:k:${processed.keys[0]}`))
    expect(ttlAfter).toBeGreaterThan(0)
    expect(ttlAfter).toBeLessThanOrEqual(ttlBefore)
    expect(await tagged.append(processed)).toBe('duplicate')
    expect(await tagged.append(waiting)).toBe('duplicate')
    // Both waiting deliveries are taken from the new prefix, the dead letter is listed there.
    expect(await tagged.stats()).toMatchObject({ depth: 2, dead: 1 })
    const taken = await tagged.take(10, 60_000)
    expect(taken.map((e) => e.id).sort()).toEqual([waiting.id, fresh.id].sort())
    expect((await tagged.dead()).map((d) => d.id)).toEqual([dead.id])
    // Running it again finds nothing to do.
    expect(await moveRedisInboxPrefix({ client: redis.client })).toEqual({ moved: 0, merged: 0 })
  })

  it('refuses prefixes that cannot be moved safely', async () => {
    await expect(moveRedisInboxPrefix({ client: redis.client, from: 'a:', to: 'a:' })).rejects.toThrow(TypeError)
    await expect(moveRedisInboxPrefix({ client: redis.client, from: 'a:', to: 'a:b:' })).rejects.toThrow(/not starting with `from`/)
    await expect(moveRedisInboxPrefix({ client: redis.client, from: `x-${randomUUID()}:`, batch: 0 })).rejects.toThrow(/batch/)
  })
})
