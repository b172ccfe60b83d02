/**
 * `node bench/store.mjs`: the idempotency stores at scale. MemoryStore holding 1 M completed ids:
 * retained heap (target <= 150 MB, measured as heapUsed after a full GC, so it re-runs itself
 * with --expose-gc) and the CPU cost of one claim + complete, while filling and once full (every
 * new id then evicts the oldest). RedisStore against a real redis-server on 127.0.0.1 (skipped,
 * with the reason, when redis-server is not installed): round trips and commands per fresh
 * delivery (target <= 2 round trips), counted by the server's own INFO commandstats.
 * Writes docs/benchmarks-store.json unless --no-write.
 */
/* global gc */
import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const IDS = Number(process.env.SVC_BENCH_IDS ?? 1_000_000)

if (typeof globalThis.gc !== 'function') {
  const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit', timeout: 10 * 60 * 1000 })
  process.exit(child.status ?? 1)
}

const { MemoryStore } = await import('svc-webhooks')
const cpuNs = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) * 1e3
}
/**
 * A key as the receiver builds it, `<endpoint>:<delivery id>`, from an id as an HTTP parser hands
 * it over: one flat string. (randomUUID() returns a rope of ~30 string pieces: keeping those would
 * measure Node's UUID helper, not the store.)
 */
const newKey = () => `default:${Buffer.from(randomUUID(), 'latin1').toString('latin1')}`
const owner = randomUUID()
const LEASE = 60_000
const RETENTION = 72 * 3600 * 1000

async function claimComplete(store, keys) {
  for (const key of keys) {
    if ((await store.claim(key, owner, LEASE)) !== 'claimed') throw new Error(`bench:store: ${key} was not claimed`)
    await store.complete(key, owner, RETENTION)
  }
}

/** Keys made one at a time, so the only ones kept are those the store retains. */
function* freshKeys(count) {
  for (let i = 0; i < count; i++) yield newKey()
}

// Memory: the heap a store full of completed ids retains, its key strings included.
gc()
const before = process.memoryUsage().heapUsed
const store = new MemoryStore({ maxEntries: IDS })
await claimComplete(store, freshKeys(IDS))
gc()
const retainedBytes = process.memoryUsage().heapUsed - before
if (store.size !== IDS) throw new Error(`bench:store: holds ${store.size} ids, expected ${IDS}`)

// Cost per delivery, keys made beforehand: into an empty store, then into the full one, where
// each fresh id evicts the oldest completion.
const TIMED = Math.min(200_000, IDS)
const timed = async (target) => {
  const keys = Array.from({ length: TIMED }, newKey)
  const t0 = cpuNs()
  await claimComplete(target, keys)
  return (cpuNs() - t0) / TIMED
}
const fillNs = await timed(new MemoryStore({ maxEntries: IDS }))
const fullNs = await timed(store)
if (store.size !== IDS) throw new Error(`bench:store: holds ${store.size} ids once full, expected ${IDS}`)

const memory = {
  ids: IDS,
  retainedMB: retainedBytes / 1024 / 1024,
  bytesPerId: retainedBytes / IDS,
  claimCompleteNs: { filling: fillNs, full: fullNs },
}
console.log(`MemoryStore, ${IDS.toLocaleString('en-US')} retained ids: ${memory.retainedMB.toFixed(1)} MB heap (${Math.round(memory.bytesPerId)} B/id; target <= 150 MB)`)
console.log(`  claim + complete: ${Math.round(fillNs)} ns while filling, ${Math.round(fullNs)} ns once full (evicting), CPU time`)

const redis = await redisRoundTrips()
if (redis.skipped) console.log(`RedisStore: SKIPPED: ${redis.skipped}`)
else {
  console.log(`RedisStore (${redis.client}, redis-server ${redis.server}): ${redis.commandsPerDelivery} commands, so at most ${redis.roundTripsPerDelivery} round trips, per fresh delivery (claim + complete; target <= 2): ${JSON.stringify(redis.byCommand)}`)
}

const replication = await replicationCost()
if (replication.skipped) console.log(`replicas option: SKIPPED: ${replication.skipped}`)
else {
  console.log(`The replicas option on the accept path (in process, receiver.handle, ${replication.deliveries} fresh deliveries, ${replication.concurrency} at once, Sentinel set: a primary, two replicas on 127.0.0.1; medians of ${replication.rounds} alternating rounds):`)
  console.log('| path | replicas 0: deliveries/s | replicas 1: deliveries/s | ratio | replicas 0: p50 / p99 ms | replicas 1: p50 / p99 ms |')
  console.log('|---|---|---|---|---|---|')
  for (const row of replication.rows) {
    console.log(`| ${row.path} | ${Math.round(row.off.perSecond)} | ${Math.round(row.on.perSecond)} | ${(row.on.perSecond / row.off.perSecond).toFixed(2)} | ${row.off.p50.toFixed(2)} / ${row.off.p99.toFixed(2)} | ${row.on.p50.toFixed(2)} / ${row.on.p99.toFixed(2)} |`)
  }
}

if (!process.argv.includes('--no-write')) {
  const out = { date: new Date().toISOString(), node: process.versions.node, memory, redis, replication }
  writeFileSync(join(ROOT, 'docs/benchmarks-store.json'), `${JSON.stringify(out, null, 2)}\n`)
  console.error('bench:store: wrote docs/benchmarks-store.json')
}

/** Fresh deliveries through RedisStore (ioredis): what the server executed, per delivery. */
async function redisRoundTrips() {
  const scripts = await import('../tools/redis.mjs')
  if (!scripts.findRedisServer()) return { skipped: 'redis-server is not installed (apt-get install -y redis-server)' }
  let RedisStore
  try {
    ;({ RedisStore } = await import('svc-webhooks/redis'))
  } catch (error) {
    return { skipped: `svc-webhooks/redis is not built (${error.code ?? error.message})` }
  }
  const { default: Redis } = await import('ioredis')
  const server = await scripts.startRedisServer()
  const client = new Redis(server.url, { lazyConnect: true })
  try {
    await client.connect()
    const store = new RedisStore({ client })
    const ids = Array.from({ length: 50 }, newKey)
    await claimComplete(store, ids.slice(0, 5)) // warm: loads the scripts into the server's cache
    // What the server received from the store's connection, by MONITOR (commands a Lua script
    // runs itself are tagged `lua` there and are not round trips). Each store call is awaited
    // before the next, as the receiver does (claim, handler, complete): a delivery then costs as
    // many round trips as the commands it sent.
    const monitor = await client.duplicate().monitor()
    const byCommand = {}
    monitor.on('monitor', (_time, args, source) => {
      if (source === 'lua') return
      if (!['ping', 'info'].includes(String(args[0]).toLowerCase())) byCommand[String(args[0]).toLowerCase()] = (byCommand[String(args[0]).toLowerCase()] ?? 0) + 1
    })
    const n = ids.length - 5
    await claimComplete(store, ids.slice(5))
    await client.ping() // MONITOR lines arrive asynchronously: this one is after every store command
    await new Promise((resolve) => setTimeout(resolve, 200))
    monitor.disconnect()
    for (const command of Object.keys(byCommand)) byCommand[command] /= n
    const commands = Object.values(byCommand).reduce((a, b) => a + b, 0)
    return {
      byCommand,
      client: 'ioredis',
      server: (await client.info('server')).match(/redis_version:(\S+)/)?.[1] ?? 'unknown',
      commandsPerDelivery: commands,
      roundTripsPerDelivery: commands,
    }
  } finally {
    client.disconnect()
    await server.stop()
  }
}

/**
 * What `replicas: 1` costs where the sender waits: a Sentinel set of its own (tools/redis-sentinel.mjs,
 * a primary and two replicas on 127.0.0.1), one ioredis client, and the receiver's accept path
 * in process (`receiver.handle`: verify, claim, no-op handler, complete; or verify and append),
 * with and without the option, rounds alternating which goes first.
 */
async function replicationCost() {
  const scripts = await import('../tools/redis.mjs')
  if (!scripts.findRedisServer()) return { skipped: 'redis-server is not installed (apt-get install -y redis-server)' }
  const { startSentinelSet } = await import('../tools/redis-sentinel.mjs')
  const { createWebhookReceiver } = await import('svc-webhooks')
  const { RedisInbox, RedisStore } = await import('svc-webhooks/redis')
  const { sampleEvent, signWebhook } = await import('svc-webhooks/testing')
  const { default: Redis } = await import('ioredis')
  const deliveries = Number(process.env.SVC_BENCH_REPLICATED ?? 2000)
  const concurrency = 16
  const rounds = 3
  const secret = 'svc_whsec_bench_replicas'
  const set = await startSentinelSet({ replicas: 2, partitionable: false, config: ['--min-replicas-to-write', '1', '--min-replicas-max-lag', '10'] })
  const client = new Redis(set.clientOptions())
  try {
    const measure = async (path, replicas) => {
      const engine = path === 'store' ? { store: new RedisStore({ client, replicas }), on: { 'message.received': () => {} } } : { inbox: new RedisInbox({ client, replicas }) }
      const receiver = createWebhookReceiver({ secret, log: false, ...engine })
      const signed = await Promise.all(Array.from({ length: deliveries }, () => signWebhook({ secret, event: sampleEvent('message.received'), id: randomUUID() })))
      const latencies = []
      let next = 0
      const t0 = performance.now()
      await Promise.all(Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < deliveries; i = next++) {
          const started = performance.now()
          const answer = await receiver.handle({ method: 'POST', body: signed[i].rawBody, headers: signed[i].headers })
          if (answer.status >= 300) throw new Error(`bench:store: ${path} answered ${answer.status}`)
          latencies.push(performance.now() - started)
        }
      }))
      const seconds = (performance.now() - t0) / 1000
      latencies.sort((a, b) => a - b)
      return { perSecond: deliveries / seconds, p50: latencies[Math.floor(latencies.length / 2)], p99: latencies[Math.floor(latencies.length * 0.99)] }
    }
    const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
    const rows = []
    for (const path of ['store', 'inbox']) {
      const off = []
      const on = []
      for (let round = 0; round < rounds; round++) {
        if (round % 2 === 0) {
          off.push(await measure(path, 0))
          on.push(await measure(path, 1))
        } else {
          on.push(await measure(path, 1))
          off.push(await measure(path, 0))
        }
      }
      const pick = (runs) => ({ perSecond: median(runs.map((r) => r.perSecond)), p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)) })
      rows.push({ path, off: pick(off), on: pick(on) })
    }
    return { deliveries, concurrency, rounds, rows }
  } finally {
    client.disconnect()
    await set.stop()
  }
}
