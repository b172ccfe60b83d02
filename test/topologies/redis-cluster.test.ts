/**
 * Redis Cluster by default (DESIGN.md "Outgrowing one node"): a real 6-node Cluster on 127.0.0.1
 * (tools/redis-cluster.mjs: 3 primaries, 3 replicas), reached with ioredis `Cluster` and
 * node-redis `createCluster`, with the packages' default prefixes. A sender that follows the
 * retry rules (tools/soak/sender.mjs) posts deliveries over HTTP while the primary of a shard the
 * engine uses is killed with SIGKILL; it counts what the service would: consecutive non-2xx (20
 * disables the endpoint), permanent 4xx, lost (2xx, never run), run twice. Then it resends every
 * delivery (a user's `resend`): each must be answered 2xx and none run again.
 *
 * - the store path: a receiver with `RedisStore`, the handler in the request (and a
 *   `RedisSecretSource` written and read through the Cluster);
 * - the inbox path: a receiver with `RedisInbox` and an inbox worker, the primary of the inbox's
 *   slot killed;
 * - BullMQ on an ioredis Cluster with `{bull}`: every accepted delivery runs once.
 *
 * Also, without a cluster running: what is refused at construction and why (a RedisInbox prefix
 * without a hash tag on a Cluster client, BullMQ on a node-redis Cluster or an untagged prefix).
 */
import { Cluster } from 'ioredis'
import { createCluster } from 'redis'
import { Queue, Worker } from 'bullmq'
import { afterEach, describe, expect, it } from 'vitest'
import { createInboxWorker, type IdempotencyStore, type WebhookInbox } from 'svc-webhooks'
import { BullMQInbox, createBullMQProcessor } from 'svc-webhooks/bullmq'
import { createNodeHandler } from 'svc-webhooks/node'
import { RedisInbox, RedisSecretSource, RedisStore } from 'svc-webhooks/redis'
import { describeWithService } from '../support/services.js'
import { listen } from '../support/servers.js'
import { redisClusterSkipReason, slotOf, startRedisCluster, type RedisCluster } from '../../tools/redis-cluster.mjs'
import { sendAtRate } from '../../tools/soak/sender.mjs'

const SECRET = 'svc_whsec_redis_cluster_tests'
const COUNT = 100
const RATE = 40
/** When, from the start of the run, the shard's primary is killed. */
const KILL_AT_MS = 800

type Kind = 'ioredis' | 'node-redis'

/** A connected cluster client of `kind`, and how to close it. */
async function connect(kind: Kind, cluster: RedisCluster): Promise<{ client: unknown; close: () => Promise<void> }> {
  if (kind === 'ioredis') {
    const client = new Cluster(cluster.nodes)
    client.on('error', () => {})
    return { client, close: async () => void client.disconnect() }
  }
  const client = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) })
  client.on('error', () => {})
  await client.connect()
  return { client, close: async () => void (await client.close().catch(() => undefined)) }
}

/**
 * Posts COUNT deliveries at RATE/s through a receiver over HTTP, kills the primary serving
 * `slot` at KILL_AT_MS, waits until `settled()` (the worker drained), then resends every delivery.
 */
async function run(options: { receiver: Parameters<typeof createNodeHandler>[0]; runs: Map<string, number>; cluster: RedisCluster; slot: number; settled?: () => Promise<boolean> }) {
  const http = await listen(createNodeHandler({ log: false, ...options.receiver }))
  try {
    const rules = { urls: [`${http.url}/`], secret: SECRET, disableAfter: 20, backoffMs: 100, maxBackoffMs: 1000, maxAttempts: 40 }
    const killed = (async () => {
      await new Promise((resolve) => setTimeout(resolve, KILL_AT_MS))
      return options.cluster.killPrimary(options.slot)
    })()
    const first = await sendAtRate({ ...rules, count: COUNT, rate: RATE })
    const failover = await killed
    // Bounded: the inbox worker drains what was accepted.
    for (let i = 0; i < 200 && options.settled && !(await options.settled()); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    const runsBefore = new Map(options.runs)
    const resend = await sendAtRate({ ...rules, deliveries: first.deliveries, rate: RATE * 4, count: 0 })
    for (let i = 0; i < 40 && options.settled && !(await options.settled()); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    const ran = (id: string) => options.runs.get(id) ?? 0
    return {
      failover,
      sender: {
        maxConsecutiveFailures: first.figures.maxConsecutiveFailures,
        disabled: first.figures.disabled,
        permanent: first.figures.permanent.length,
        gaveUp: first.figures.gaveUp.length,
        lost: first.ids.filter((id) => first.delivered.has(id) && ran(id) === 0).length,
        runTwice: first.ids.filter((id) => (runsBefore.get(id) ?? 0) > 1).length,
      },
      resend: {
        answered2xx: resend.delivered.size,
        maxConsecutiveFailures: resend.figures.maxConsecutiveFailures,
        permanent: resend.figures.permanent.length,
        ranAgain: first.ids.filter((id) => ran(id) > (runsBefore.get(id) ?? 0) && (runsBefore.get(id) ?? 0) > 0).length,
        runTwice: first.ids.filter((id) => ran(id) > 1).length,
      },
    }
  } finally {
    await http.close()
  }
}

describeWithService('Redis Cluster (6 nodes on 127.0.0.1, a shard primary killed mid-run)', 'redis-server and redis-cli', redisClusterSkipReason(), () => {
  const closing: Array<() => Promise<unknown>> = []
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined)
  })

  async function start(kind: Kind) {
    const cluster = await startRedisCluster()
    closing.push(() => cluster.stop())
    const { client, close } = await connect(kind, cluster)
    closing.push(close)
    return { cluster, client }
  }

  const handler = (runs: Map<string, number>) => ({
    'message.received': (_event: unknown, delivery: { id: string }) => void runs.set(delivery.id, (runs.get(delivery.id) ?? 0) + 1),
  })

  it("BullMQ on an ioredis Cluster with prefix '{bull}': every accepted delivery runs once", async () => {
    const { cluster } = await start('ioredis')
    const connection = () => {
      const c = new Cluster(cluster.nodes, { maxRetriesPerRequest: null } as never)
      c.on('error', () => {})
      return c
    }
    const queue = new Queue('webhooks', { connection: connection(), prefix: '{bull}' })
    closing.push(() => queue.close())
    const runs = new Map<string, number>()
    const worker = new Worker('webhooks', createBullMQProcessor({ on: handler(runs), log: false }), { connection: connection(), prefix: '{bull}' })
    worker.on('error', () => {})
    closing.push(() => worker.close(true))
    const http = await listen(createNodeHandler({ secret: SECRET, inbox: new BullMQInbox({ queue }), log: false }))
    closing.push(() => http.close())
    const sent = await sendAtRate({ urls: [`${http.url}/`], secret: SECRET, count: 30, rate: 60, disableAfter: 20 })
    expect(sent.delivered.size).toBe(30)
    for (let i = 0; i < 100 && runs.size < 30; i++) await new Promise((resolve) => setTimeout(resolve, 50))
    expect(runs.size).toBe(30)
    expect([...runs.values()].every((n) => n === 1)).toBe(true)
  }, 60_000)

  for (const kind of ['ioredis', 'node-redis'] as const) {
    it(`${kind}: the store path with RedisStore's default prefix: never disabled, 0 permanent 4xx, 0 lost, 0 run twice, and a resend of all runs none again`, async () => {
      const { cluster, client } = await start(kind)
      // A failover takes 2.5–3.5 s here, and node-redis finds the new primary about 3 s after
      // that: an operation waits through it inside the sender's 10 s instead of answering 503 at
      // the default 2 s (each 503 counts toward the 20 that disable the endpoint).
      const store = new RedisStore({ client: client as never, timeoutMs: 8_000 })
      // The secret source (one key per operation) reads back what it wrote through the Cluster.
      const source = new RedisSecretSource({ client: client as never, key: `svc-webhooks:secret:ep-${kind}` })
      await source.write({ secrets: [SECRET] })
      expect((await source.read()).secrets).toEqual([SECRET])
      const runs = new Map<string, number>()
      // The shard holding slot 0 serves a third of the dedupe keys.
      const figures = await run({ receiver: { secret: SECRET, store: store as IdempotencyStore, on: handler(runs) }, runs, cluster, slot: 0 })
      console.log(`[redis-cluster] ${kind} store path:`, JSON.stringify(figures))
      expect(figures.sender).toMatchObject({ disabled: false, permanent: 0, gaveUp: 0, lost: 0, runTwice: 0 })
      expect(figures.sender.maxConsecutiveFailures).toBeLessThan(20)
      expect(figures.resend).toMatchObject({ answered2xx: COUNT, permanent: 0, ranAgain: 0, runTwice: 0 })
    }, 90_000)

    it(`${kind}: the inbox path with RedisInbox's default prefix, the inbox's primary killed: never disabled, 0 permanent 4xx, 0 lost, 0 run twice, and a resend of all runs none again`, async () => {
      const { cluster, client } = await start(kind)
      const inbox = new RedisInbox({ client: client as never })
      const runs = new Map<string, number>()
      const worker = createInboxWorker({ inbox: inbox as WebhookInbox, on: handler(runs), pollIntervalMs: 20, firstRetryDelayMs: 50, log: false })
      worker.start()
      closing.push(() => worker.stop(2_000))
      const settled = async () => {
        try {
          return (await inbox.stats()).depth === 0
        } catch {
          return false
        }
      }
      const figures = await run({ receiver: { secret: SECRET, inbox }, runs, cluster, slot: slotOf(`${inbox.prefix}due`), settled })
      console.log(`[redis-cluster] ${kind} inbox path:`, JSON.stringify(figures))
      expect(figures.sender).toMatchObject({ disabled: false, permanent: 0, gaveUp: 0, lost: 0, runTwice: 0 })
      expect(figures.sender.maxConsecutiveFailures).toBeLessThan(20)
      expect(figures.resend).toMatchObject({ answered2xx: COUNT, permanent: 0, ranAgain: 0, runTwice: 0 })
      expect(await inbox.stats()).toMatchObject({ depth: 0, dead: 0 })
    }, 90_000)
  }
})

describe('Redis Cluster: what is refused at construction, and why', () => {
  const nodes = [{ host: '127.0.0.1', port: 1 }]

  it('RedisInbox: a prefix without a hash tag on a Cluster client (ioredis and node-redis) is refused with the reason and the fix; a single server takes it', () => {
    const io = new Cluster(nodes, { lazyConnect: true })
    const node = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })
    for (const client of [io, node]) {
      expect(() => new RedisInbox({ client: client as never, prefix: 'myapp:inbox:' })).toThrow(/no hash tag.*CROSSSLOT.*Use '\{myapp:inbox\}:'/s)
      // The default, and any tagged prefix, are taken.
      expect(new RedisInbox({ client: client as never }).prefix).toBe('{svc-webhooks:inbox}:')
      expect(new RedisInbox({ client: client as never, prefix: 'app:{tenant-1}:' }).prefix).toBe('app:{tenant-1}:')
      // An empty tag ({}) hashes the whole key: no better than none.
      expect(() => new RedisInbox({ client: client as never, prefix: '{}inbox:' })).toThrow(/no hash tag/)
    }
    io.disconnect()
  })

  it('BullMQInbox: a queue on a node-redis Cluster is refused (BullMQ 6 Workers never wake on it); on an ioredis Cluster its prefix needs a hash tag', async () => {
    const node = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })
    const io = new Cluster(nodes, { lazyConnect: true })
    const queues = [
      new Queue('refused-node-redis', { connection: node as never, prefix: '{bull}' }),
      new Queue('refused-untagged', { connection: io, prefix: 'bull' }),
      new Queue('taken', { connection: io, prefix: '{bull}' }),
    ]
    try {
      expect(() => new BullMQInbox({ queue: queues[0]! })).toThrow(/node-redis Cluster.*stay in 'wait'.*ioredis/s)
      expect(() => new BullMQInbox({ queue: queues[1]! })).toThrow(/BullMQ queue `prefix` "bull" has no hash tag.*Use '\{bull\}'/s)
      expect(() => new BullMQInbox({ queue: queues[2]! })).not.toThrow()
    } finally {
      for (const q of queues) await q.close().catch(() => undefined)
      io.disconnect()
    }
  })
})
