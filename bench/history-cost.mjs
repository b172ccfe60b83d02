/**
 * `node bench/history-cost.mjs` (after `npm run build`): the CPU each recorded delivery costs,
 * without HTTP, so another process's burst on a shared machine moves it little. One receiver per
 * variant (no history, MemoryHistory, RedisHistory on a private redis-server from
 * tools/redis.mjs) takes 30,000 fresh signed deliveries, 16 at a time, letting timers run every
 * 128 so RedisHistory's batches go out as in a server; the receiver's process CPU
 * (process.cpuUsage) and the Redis server's (INFO cpu) are divided by the deliveries. Rounds
 * alternate the variants; the first is a warm-up.
 *
 * Then where RedisHistory's share of the Redis server's time goes, by command (INFO commandstats).
 *
 * Then MemoryHistory's storage alone: records of new deliveries given straight to `record()` of
 * a history kept full (its default 10,000 entries, so each new entry also trims the oldest),
 * 200,000 per round, in wall time per record (one process, no I/O), the median of the rounds.
 *
 * Options: --rounds 4 --deliveries 30000.
 */
import { freshDeliveries } from './fresh-deliveries.mjs'
import { startRedisServer } from '../tools/redis.mjs'

const option = (name, fallback) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback)
const rounds = option('--rounds', 4)
const N = option('--deliveries', 30_000)
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'

const { createWebhookReceiver } = await import('svc-webhooks')
const { MemoryHistory } = await import('svc-webhooks/history')
const { RedisHistory } = await import('svc-webhooks/redis')
const { default: Redis } = await import('ioredis')

const redis = await startRedisServer()
const client = new Redis(redis.url)
try {
  const fresh = await freshDeliveries(SECRET)
  const deliveries = () => Array.from({ length: N }, () => ({ method: 'POST', headers: fresh.headers(), body: fresh.rawBody }))
  const histories = { none: undefined, MemoryHistory: new MemoryHistory(), RedisHistory: new RedisHistory({ client, prefix: '{bench-cost}:' }) }
  const receivers = Object.fromEntries(
    Object.entries(histories).map(([name, history]) => [name, createWebhookReceiver({ secret: SECRET, on: { 'message.received': () => undefined }, log: false, ...(history && { history }) })]),
  )
  const redisCpu = async () => {
    const info = await client.info('cpu')
    return Number(/used_cpu_user:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)[1])
  }
  const measured = Object.fromEntries(Object.keys(histories).map((name) => [name, []]))
  // Only RedisHistory's writes reach this server: its command counters are the history's alone.
  await client.config('RESETSTAT')
  for (let round = 0; round < rounds; round++) {
    for (const [name, receiver] of Object.entries(receivers)) {
      const requests = deliveries()
      const redis0 = await redisCpu()
      const cpu0 = process.cpuUsage()
      for (let i = 0; i < N; i += 16) {
        await Promise.all(requests.slice(i, i + 16).map((request) => receiver.handle(request)))
        if (i % 128 === 0) await new Promise((resolve) => setTimeout(resolve, 1))
      }
      await histories[name]?.flush()
      const cpu = process.cpuUsage(cpu0)
      const redis1 = await redisCpu()
      if (round > 0) measured[name].push({ receiver: (cpu.user + cpu.system) / N, redis: ((redis1 - redis0) * 1e6) / N })
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
  const none = median(measured.none.map((m) => m.receiver))
  console.log('\n| per delivery | receiver µs | added by the history µs | Redis server µs |')
  console.log('|---|---:|---:|---:|')
  for (const [name, runs] of Object.entries(measured)) {
    const own = median(runs.map((m) => m.receiver))
    const server = median(runs.map((m) => m.redis))
    console.log(`| ${name === 'none' ? 'without history' : name} | ${own.toFixed(1)} | ${name === 'none' ? '' : (own - none).toFixed(1)} | ${name === 'RedisHistory' ? server.toFixed(1) : ''} |`)
  }
  // Where the redis-server's time goes, from its own counters (INFO commandstats, which counts the
  // commands a script runs as well as the script): per delivery recorded, over every round.
  const recorded = rounds * N
  const commands = [...(await client.info('commandstats')).matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)].map(([, name, calls, usec]) => ({ name, calls: Number(calls), usec: Number(usec) }))
  const isScript = (c) => c.name === 'eval' || c.name === 'evalsha'
  const script = commands.filter(isScript).reduce((sum, c) => sum + c.usec, 0)
  const inside = commands.filter((c) => !isScript(c) && c.name !== 'info' && c.name !== 'config')
  console.log('\n| RedisHistory in the redis-server, per delivery | µs |')
  console.log('|---|---:|')
  for (const c of inside.filter((c) => c.usec / recorded >= 0.01).sort((a, b) => b.usec - a.usec)) console.log(`| ${c.name.toUpperCase()} (${c.calls} calls) | ${(c.usec / recorded).toFixed(2)} |`)
  console.log(`| the script's own work (its commands' time taken out) | ${((script - inside.reduce((sum, c) => sum + c.usec, 0)) / recorded).toFixed(2)} |`)
  console.log(`| the scripts in all | ${(script / recorded).toFixed(2)} |`)
  const full = new MemoryHistory()
  const perRecord = []
  for (let round = 0; round <= rounds; round++) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < 200_000; i++) full.record({ id: `evt_${round}_${i}`, endpoint: 'default', at: Date.now(), outcome: 'processed', status: 200, delivered: true, addAttempt: true, processed: true, error: null })
    if (round > 0) perRecord.push(Number(process.hrtime.bigint() - started) / 200_000)
  }
  console.log(`\nMemoryHistory.record() into a full history (10,000 entries): ${Math.round(median(perRecord))} ns per record (rounds: ${perRecord.map(Math.round).join(', ')})`)
} finally {
  client.disconnect()
  await redis.stop()
}
