/**
 * RedisSecretSource with `replicas`: a rotation step counts as written only once the replicas
 * hold it, on a real redis-server primary, alone and then with a replica attached (REPLICAOF).
 */
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { describeWithRedis } from '../support/services.js'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const SECRET = 'svc_whsec_ReplicasSecret000000000000'

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting for the replica')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describeWithRedis('RedisSecretSource `replicas`', () => {
  let primary: RedisServer
  let replica: RedisServer | undefined
  let client: Redis
  let replicaClient: Redis | undefined
  beforeAll(async () => {
    primary = await startRedisServer()
    client = new Redis(primary.url)
    client.on('error', () => {})
  })
  afterAll(async () => {
    client?.disconnect()
    replicaClient?.disconnect()
    await replica?.stop()
    await primary?.stop()
  })

  it('bad `replicas` values, or a Cluster client, are refused at construction', () => {
    for (const replicas of [-1, 1.5, 17, '1', null]) {
      expect(() => new RedisSecretSource({ client, key: 'k', replicas: replicas as never }), String(replicas)).toThrow(/`replicas` must be a whole number/)
    }
    const cluster = Object.assign(Object.create(client) as Redis, { isCluster: true })
    expect(() => new RedisSecretSource({ client: cluster, key: 'k', replicas: 1 })).toThrow(/needs a client of one primary/)
    expect(() => new RedisSecretSource({ client: cluster, key: 'k' })).not.toThrow()
    expect(new RedisSecretSource({ client, key: 'k', replicas: 0 }).replicas).toBe(0)
  })

  it('with no replica, a write is never reported as written: it rejects within its timeout, conditional or not', async () => {
    const source = new RedisSecretSource({ client, key: 'secret:alone', timeoutMs: 1200, replicas: 1 })
    const started = Date.now()
    await expect(source.write({ secrets: [SECRET] })).rejects.toThrow(/RedisSecretSource\.write got no answer within 1200 ms.*NOTREPLICATED/s)
    expect(Date.now() - started).toBeLessThan(2500)
    // A conditional write is not turned into "another writer came first" by its own retries.
    await expect(source.write({ secrets: [SECRET, 'svc_whsec_Other'] }, { version: 1 })).rejects.toThrow(/NOTREPLICATED/)
    // Its retries waited for the replicas again rather than storing new versions.
    expect(JSON.parse((await client.get('secret:alone'))!)).toMatchObject({ version: 2 })
    expect((await source.durabilityWarnings()).join('\n')).toMatch(/no replica/)
  }, 10_000)

  it('with a replica attached, a write resolves true once the replica holds it (ioredis and node-redis)', async () => {
    replica = await startRedisServer()
    replicaClient = new Redis(replica.url)
    replicaClient.on('error', () => {})
    await replicaClient.call('REPLICAOF', '127.0.0.1', String(primary.port))
    await until(async () => String(await replicaClient!.call('INFO', 'replication')).includes('master_link_status:up'))
    const node = createClient({ url: primary.url })
    node.on('error', () => {})
    await node.connect()
    try {
      for (const [name, c] of [['ioredis', client], ['node-redis', node]] as const) {
        const key = `{ep_${name}}:secret`
        const source = new RedisSecretSource({ client: c, key, replicas: 1 })
        expect(await source.write({ secrets: [SECRET] }), name).toBe(true)
        expect(JSON.parse((await replicaClient.get(key))!), name).toEqual({ version: 1, secrets: [SECRET] })
        expect(await source.write({ secrets: ['svc_whsec_Next', SECRET] }, { version: 1 }), name).toBe(true)
        expect(JSON.parse((await replicaClient.get(key))!).secrets, name).toEqual(['svc_whsec_Next', SECRET])
        // Another writer came first: false, as without `replicas`.
        expect(await source.write({ secrets: [SECRET] }, { version: 1 }), name).toBe(false)
        expect((await source.read()).secrets, name).toEqual(['svc_whsec_Next', SECRET])
        // The fence shares the key's hash tag.
        expect(await replicaClient.get(`{ep_${name}}:fence`), name).not.toBeNull()
      }
    } finally {
      await node.quit().catch(() => {})
    }
  }, 20_000)
})
