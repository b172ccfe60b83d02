/**
 * RedisHistory on a real Redis Cluster (three primaries, three replicas on 127.0.0.1, through
 * ioredis' Cluster client): every key of a history hashes to one slot by construction, so its
 * scripts run without CROSSSLOT, whatever prefix is given.
 */
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createWebhookReceiver } from 'svc-webhooks'
import { RedisHistory } from 'svc-webhooks/redis'
import { signWebhook } from 'svc-webhooks/testing'
import { describeWithService } from '../support/services.js'
import { redisClusterSkipReason, slotOf, startRedisCluster, type RedisCluster } from '../../tools/redis-cluster.mjs'

const SECRET = 'svc_whsec_history_cluster_tests'

describeWithService('RedisHistory on a Redis Cluster', 'a Redis Cluster (redis-server and redis-cli)', redisClusterSkipReason(), () => {
  let cluster: RedisCluster
  let client: Cluster
  beforeAll(async () => {
    cluster = await startRedisCluster()
    client = new Cluster(cluster.nodes)
    client.on('error', () => {})
  }, 120_000)
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  for (const prefix of [undefined, 'plain:prefix:']) {
    it(`records, lists, gets and counts refusals with prefix ${prefix ?? '(default)'}`, async () => {
      const history = new RedisHistory({ client, keepBodies: true, log: false, ...(prefix && { prefix }) })
      // Keys in other slots would be CROSSSLOT; every key is built from the tagged prefix.
      expect(new Set([`${history.prefix}i`, `${history.prefix}e`, `${history.prefix}b`, `${history.prefix}ep`, `${history.prefix}r:0`].map(slotOf)).size).toBe(1)
      const receiver = createWebhookReceiver({ secret: SECRET, history, log: false, on: { 'message.received': () => undefined } })
      for (let i = 0; i < 20; i++) {
        const signed = await signWebhook({ secret: SECRET, id: `evt_cluster_${i}`, event: { event: 'message.received', message: { id: 'm', text: 'hi' } } })
        expect((await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })).status).toBe(200)
      }
      const forged = await signWebhook({ secret: 'svc_whsec_not_the_cluster_secret', id: 'evt_forged', event: { event: 'message.received' } })
      expect((await receiver.handle({ method: 'POST', body: forged.rawBody, headers: forged.headers })).status).toBe(401)
      await history.flush()
      expect(history.stats()).toMatchObject({ failed: 0, dropped: 0 })
      expect(await history.size()).toBe(20)
      expect((await history.list({ limit: 50 })).entries).toHaveLength(20)
      expect(await history.get('evt_cluster_7')).toMatchObject({ outcome: 'processed', hasBody: true })
      expect((await history.refusals()).find((r) => r.code === 'invalid_signature')?.count).toBe(1)
      expect((await receiver.replay('evt_cluster_7')).outcome).toBe('processed')
    })
  }
})
