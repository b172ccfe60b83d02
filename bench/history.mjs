/**
 * `npm run bench:history`, one run, side by side:
 * - the receiver's requests/s over real HTTP (node:http, 127.0.0.1, autocannon) without history,
 *   with MemoryHistory and with RedisHistory (a private redis-server from tools/redis.mjs), each in
 *   its own process, every request a fresh signed delivery. Target: with history >= 90 % of without.
 * - the console's overview page rendered with 100,000 entries in MemoryHistory and in RedisHistory
 *   (median of 30 GETs through the Fetch handler). Target: under 50 ms.
 *
 * The three receivers run side by side for the whole run and take the load in turns, one slice
 * of --duration seconds each, in an order that rotates every round: a machine shared with other
 * work slows down in bursts of seconds, and short slices in turns spread a burst over every
 * variant instead of landing on one. Each ratio is the median over rounds of (with / without)
 * measured in the same round. On Linux a second table gives the CPU time each request cost,
 * summed over every slice of the variant: the receiver's process, the redis-server and the load
 * generator (this process), read from /proc and process.cpuUsage(). A neighbour's burst moves
 * requests/s far more than it moves CPU per request.
 *
 * Options: --duration 1 --warmup 3 --rounds 15 --connections 16. `--inbox` adds the production
 * receiver: appending to a RedisInbox (202), without history, with MemoryHistory and with
 * RedisHistory, each measured against the first; `--store` the same for a receiver that
 * deduplicates in a RedisStore (what several receiver processes share). `--split` adds two
 * receivers that split what RedisHistory costs: one whose RedisHistory builds every batch's
 * arguments and sends nothing (the receiver's own work: recording, batching, the arguments), and
 * one whose batches go to a script that does nothing (that work, the client's send and the
 * server's intake of the arguments, but none of the script's work), and one whose batches are
 * each one XADD of the batch as one JSON string (the least any layout on Redis could send).
 */
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { freshDeliveries } from './fresh-deliveries.mjs'
import { cpuMsOf } from '../tools/order/run.mjs'
import { startRedisServer } from '../tools/redis.mjs'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
const option = (name, fallback) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback)
const duration = option('--duration', 1)
const warmup = option('--warmup', 3)
const rounds = option('--rounds', 15)
const connections = option('--connections', 16)
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
/** A process's CPU time so far in µs (user + system, from /proc), or undefined off Linux. */
const cpuOf = (pid) => {
  const ms = cpuMsOf(pid)
  return ms === undefined ? undefined : ms * 1000
}

async function startServer(variant, redisUrl) {
  const child = spawn(process.execPath, [join(ROOT, 'bench/history-server.mjs'), variant, redisUrl ?? ''], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench:history: ${variant} did not start within 30 s`)), 30_000)
    createInterface({ input: child.stdout }).once('line', (line) => (clearTimeout(timer), resolve(JSON.parse(line).port)))
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`bench:history: ${variant} exited (${code})`))))
  })
  const stop = () => new Promise((resolve) => {
    const timer = setTimeout(() => (child.kill('SIGKILL'), resolve()), 5000)
    child.once('exit', () => (clearTimeout(timer), resolve()))
    child.stdin.end()
  })
  return { port, stop, pid: child.pid }
}

async function main() {
  const { default: autocannon } = await import('autocannon')
  const redis = await startRedisServer()
  try {
    const first = await freshDeliveries(SECRET, `evt_${process.pid}_`)
    const sign = first.headers
    const load = async (port, seconds, cpu) => {
      const before = cpu && { receiver: cpuOf(cpu.pid), redis: cpuOf(redis.pid), own: process.cpuUsage() }
      const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests: [{ method: 'POST', path: '/', setupRequest: (q) => ({ ...q, headers: sign(), body: first.body }) }] })
      if (r.non2xx > 0 || r.errors + r.timeouts > 0) throw new Error(`bench:history: ${r.non2xx} non-2xx answers, ${r.errors + r.timeouts} errors`)
      if (before?.receiver !== undefined && before.redis !== undefined) {
        const own = process.cpuUsage(before.own)
        cpu.receiver += cpuOf(cpu.pid) - before.receiver
        cpu.redis += cpuOf(redis.pid) - before.redis
        cpu.load += own.user + own.system
        cpu.requests += r.requests.total
      }
      return r.requests.average
    }
    const split = process.argv.includes('--split')
    const variants = ['none', 'memory', 'redis', ...(split ? ['redis-unsent', 'redis-noop', 'redis-blob'] : []), ...(process.argv.includes('--inbox') ? ['inbox', 'inbox-memory', 'inbox-redis'] : []), ...(process.argv.includes('--store') ? ['store', 'store-memory', 'store-redis'] : [])]
    const measured = Object.fromEntries(variants.map((v) => [v, []]))
    const cpu = Object.fromEntries(variants.map((v) => [v, { pid: undefined, receiver: 0, redis: 0, load: 0, requests: 0 }]))
    const servers = {}
    try {
      for (const variant of variants) {
        servers[variant] = await startServer(variant, redis.url)
        cpu[variant].pid = servers[variant].pid
        await load(servers[variant].port, warmup)
      }
      for (let round = 0; round < rounds; round++) {
        for (let i = 0; i < variants.length; i++) {
          // The order rotates every round, so a machine that speeds up or slows down favours none.
          const variant = variants[(i + round) % variants.length]
          measured[variant].push(await load(servers[variant].port, duration, cpu[variant]))
        }
        console.error(`  round ${round + 1}: ${variants.map((v) => `${v} ${Math.round(measured[v][round])}`).join(', ')} req/s`)
      }
    } finally {
      for (const server of Object.values(servers)) await server.stop()
    }
    const none = median(measured.none)
    const fmt = (n) => Math.round(n).toLocaleString('en-US')
    console.log('\n| receiver (node:http) | req/s | vs without history | target |')
    console.log('|---|---:|---:|---|')
    console.log(`| without history | ${fmt(none)} | 100 % | |`)
    const names = { memory: 'MemoryHistory', redis: 'RedisHistory', 'redis-unsent': 'RedisHistory, batches not sent', 'redis-noop': 'RedisHistory, a script that stores nothing', 'redis-blob': 'RedisHistory, each batch one XADD of one string', inbox: 'RedisInbox, without history', 'inbox-memory': 'RedisInbox + MemoryHistory', 'inbox-redis': 'RedisInbox + RedisHistory', store: 'RedisStore, without history', 'store-memory': 'RedisStore + MemoryHistory', 'store-redis': 'RedisStore + RedisHistory' }
    // An inbox or store receiver's variants are measured against that receiver without history.
    const groupOf = (v) => (v.startsWith('inbox') ? 'inbox' : v.startsWith('store') ? 'store' : 'none')
    for (const v of variants.slice(1)) {
      // The inbox and store receivers themselves, against the bare one.
      const base = v === groupOf(v) ? 'none' : groupOf(v)
      const share = median(measured[v].map((rps, i) => rps / measured[base][i]))
      const note = v === 'redis-unsent' || v === 'redis-noop' || v === 'redis-blob' ? '(a split of the cost, not a target)' : v === 'inbox' || v === 'store' ? '(the base of the two rows below)' : `>= 90 % ${share >= 0.9 ? 'met' : 'MISSED'}`
      console.log(`| ${names[v]} | ${fmt(median(measured[v]))} | ${(share * 100).toFixed(1)} % | ${note} |`)
    }
    if (cpu.none.requests > 0) {
      const per = (v, part) => cpu[v][part] / cpu[v].requests
      const total = (v) => per(v, 'receiver') + per(v, 'redis') + per(v, 'load')
      console.log('\n| CPU per request, µs | receiver | redis-server | load generator | total | without history ÷ total |')
      console.log('|---|---:|---:|---:|---:|---:|')
      for (const v of variants) {
        const base = groupOf(v)
        console.log(`| ${v === 'none' ? 'without history' : names[v]} | ${per(v, 'receiver').toFixed(1)} | ${per(v, 'redis').toFixed(1)} | ${per(v, 'load').toFixed(1)} | ${total(v).toFixed(1)} | ${((total(base) / total(v)) * 100).toFixed(1)} % |`)
      }
    }

    // The console's overview with 100,000 entries.
    const { MemoryHistory } = await import('svc-webhooks/history')
    const { RedisHistory } = await import('svc-webhooks/redis')
    const { createConsole } = await import('svc-webhooks/console')
    const { default: Redis } = await import('ioredis')
    const client = new Redis(redis.url)
    const histories = { MemoryHistory: new MemoryHistory({ maxEntries: 100_000 }), RedisHistory: new RedisHistory({ client, prefix: '{bench-console}:' }) }
    console.log('\n| console overview, 100,000 entries | median ms | p95 ms | target |')
    console.log('|---|---:|---:|---|')
    for (const [name, history] of Object.entries(histories)) {
      const at = Date.now() - 100_000
      for (let i = 0; i < 100_000; i++) {
        history.record({ id: `evt_${i}`, endpoint: 'default', at: at + i, outcome: i % 50 === 0 ? 'failed' : 'processed', status: i % 50 === 0 ? 500 : 200, delivered: true, addAttempt: true, eventType: 'message.received' })
        if (i % 5000 === 4999) await history.flush()
      }
      await history.flush()
      const size = await history.size()
      if (size !== 100_000) throw new Error(`bench:history: ${name} holds ${size} entries, not 100,000`)
      const handler = createConsole({ authorize: () => true, history, receiver: { stats: async () => ({ answers: {}, codes: {}, consecutiveFailures: 0 }) } })
      const times = []
      for (let i = 0; i < 35; i++) {
        const started = performance.now()
        const res = await handler(new Request('http://127.0.0.1/console/'))
        await res.text()
        if (res.status !== 200) throw new Error(`bench:history: overview answered ${res.status}`)
        if (i >= 5) times.push(performance.now() - started)
      }
      times.sort((a, b) => a - b)
      const med = median(times)
      console.log(`| ${name} | ${med.toFixed(2)} | ${times[Math.floor(times.length * 0.95)].toFixed(2)} | < 50 ms ${med < 50 ? 'met' : 'MISSED'} |`)
    }
    client.disconnect()
  } finally {
    await redis.stop()
  }
}

await main()
