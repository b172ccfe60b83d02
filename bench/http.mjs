/**
 * `npm run bench:http`: receiver throughput over real HTTP on 127.0.0.1 (autocannon 9, pinned).
 * A bare route (Express with `express.raw()`; Hono on @hono/node-server reading the body) against
 * the same route behind `webhooks()` from svc-webhooks/express and svc-webhooks/hono: verify,
 * MemoryStore claim/complete, handler, answer. Every request is a distinct delivery (a pool of
 * pre-signed ids that autocannon walks through), timestamps fresh. The server runs in a child
 * process so it never shares an event loop with the load generator. Target: >= 90 % of the bare
 * route's requests/s. Writes docs/benchmarks-http.json.
 *
 * Options: --duration 5 (seconds measured per case), --warmup 2, --rounds 2, --connections 16,
 * --no-write, --diagnose (adds bare routes reading the body with the core's readers).
 */
import { fork } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
const PATH = '/webhooks/svc'
const CASES = [
  { framework: 'express', mode: 'bare', label: 'Express 5, express.raw() route' },
  { framework: 'express', mode: 'webhooks', label: 'Express 5, svc-webhooks/express webhooks()' },
  { framework: 'hono', mode: 'bare', label: 'Hono on @hono/node-server, arrayBuffer() route' },
  { framework: 'hono', mode: 'webhooks', label: 'Hono on @hono/node-server, svc-webhooks/hono webhooks()' },
]
// `--diagnose`: bare routes that read the body with the core's own readers, to tell the cost of
// reading a body from the cost of verifying and deduplicating it.
const DIAGNOSE = [
  { framework: 'express', mode: 'read-stream', label: 'Express 5, route reading with readNodeBody()' },
  { framework: 'hono', mode: 'read-request', label: 'Hono on @hono/node-server, route reading with readRequestBody()' },
]

if (process.argv[2] === '--serve') await serve(process.argv[3], process.argv[4])
else await main()

/** Child process: one server on 127.0.0.1, an ephemeral port reported to the parent. */
async function serve(framework, mode) {
  const on = { 'message.received': () => {} }
  let server
  if (framework === 'express') {
    const { default: express } = await import('express')
    const app = express()
    if (mode === 'bare') app.post(PATH, express.raw({ type: '*/*' }), (req, res) => res.status(200).json({ ok: true, bytes: req.body.length }))
    else if (mode === 'read-stream') {
      const { readNodeBody } = await import('svc-webhooks')
      app.post(PATH, async (req, res) => res.status(200).json({ ok: true, bytes: (await readNodeBody(req, 1 << 20)).byteLength }))
    } else {
      const { webhooks } = await import('svc-webhooks/express')
      app.post(PATH, webhooks({ secret: SECRET, on }))
    }
    server = app.listen(0, '127.0.0.1')
  } else {
    const { Hono } = await import('hono')
    const { serve: honoServe } = await import('@hono/node-server')
    const app = new Hono()
    if (mode === 'bare') app.post(PATH, async (c) => c.json({ ok: true, bytes: (await c.req.arrayBuffer()).byteLength }))
    else if (mode === 'read-request') {
      const { readRequestBody } = await import('svc-webhooks')
      app.post(PATH, async (c) => c.json({ ok: true, bytes: (await readRequestBody(c.req.raw, 1 << 20)).byteLength }))
    } else {
      const { webhooks } = await import('svc-webhooks/hono')
      app.post(PATH, webhooks({ secret: SECRET, on }))
    }
    server = honoServe({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
  }
  server.once('listening', () => process.send({ port: server.address().port }))
  process.on('message', (message) => {
    if (message === 'stop') server.close(() => process.exit(0))
  })
}

function option(name, fallback) {
  const i = process.argv.indexOf(name)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}

async function main() {
  const { default: autocannon } = await import('autocannon')
  const { signWebhook, sampleEvent } = await import('svc-webhooks/testing')
  const duration = option('--duration', 5)
  const warmup = option('--warmup', 2)
  const rounds = option('--rounds', 2)
  const connections = option('--connections', 16)
  for (const [name, value, max] of [['duration', duration, 60], ['warmup', warmup, 30], ['rounds', rounds, 5], ['connections', connections, 256]]) {
    if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`bench:http: --${name} takes 1 to ${max}`)
  }
  // Ids never repeat across pools (a sequence number), and a pool is sized above what this machine
  // can serve in the time (an exhausted pool fails the run): the webhooks() route then claims,
  // runs and completes every request, never answering a cheaper duplicate.
  let sequence = 0
  const perSecond = 30_000

  /** Pre-signs `count` deliveries with a fresh timestamp: one body, distinct ids and signatures. */
  async function signPool(count) {
    const event = sampleEvent('message.received')
    const first = await signWebhook({ secret: SECRET, event, id: 'warm' })
    const { createHmac } = await import('node:crypto')
    const timestamp = Math.floor(Date.now() / 1000)
    const pool = new Array(count)
    for (let i = 0; i < count; i++) {
      const id = `evt_${timestamp}_${sequence++}`
      const v2 = createHmac('sha256', SECRET).update(`${id}.${timestamp}.`).update(first.rawBody).digest('hex')
      pool[i] = { ...first.headers, 'svc-webhook-id': id, 'svc-webhook-timestamp': String(timestamp), 'svc-webhook-signature-v2': `v2=${v2}` }
      delete pool[i]['svc-webhook-signature'] // v2 only, as the service's current deliveries verify
    }
    return { pool, body: first.body }
  }

  async function load(port, seconds, deliveries) {
    let next = 0
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: PATH,
          setupRequest: (request) => {
            if (next >= deliveries.pool.length) throw new Error('bench:http: delivery pool exhausted; raise perSecond')
            return { ...request, headers: deliveries.pool[next++], body: deliveries.body }
          },
        },
      ],
    })
    return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts, sent: next }
  }

  const cases = process.argv.includes('--diagnose') ? [...CASES, ...DIAGNOSE] : CASES
  const results = cases.map((c) => ({ ...c, rounds: [] }))
  for (let round = 0; round < rounds; round++) {
    for (const result of results) {
      const child = fork(fileURLToPath(import.meta.url), ['--serve', result.framework, result.mode], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
      try {
        const port = await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('bench:http: server did not start within 20 s')), 20_000)
          child.once('message', (m) => (clearTimeout(timer), resolve(m.port)))
          child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`bench:http: server exited (${code})`))))
        })
        await load(port, warmup, await signPool(warmup * perSecond))
        const measured = await load(port, duration, await signPool(duration * perSecond))
        if (measured.non2xx > 0 || measured.errors > 0) {
          throw new Error(`bench:http: ${result.label}: ${measured.non2xx} non-2xx answers, ${measured.errors} errors`)
        }
        result.rounds.push(measured)
        console.error(`  round ${round + 1}: ${result.label.padEnd(58)} ${Math.round(measured.rps)} req/s, p99 ${measured.p99} ms`)
      } finally {
        child.send('stop')
        await new Promise((resolve) => {
          const timer = setTimeout(() => (child.kill('SIGKILL'), resolve()), 5_000)
          child.once('exit', () => (clearTimeout(timer), resolve()))
        })
      }
    }
  }

  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
  const rows = results.map((r) => ({ ...r, rps: median(r.rounds.map((x) => x.rps)), p99: median(r.rounds.map((x) => x.p99)) }))
  const lines = ['| server | req/s | p99 latency | vs bare route |', '|---|---:|---:|---:|']
  const misses = []
  for (const row of rows) {
    const bare = rows.find((r) => r.framework === row.framework && r.mode === 'bare')
    const share = row.rps / bare.rps
    if (row.mode === 'webhooks' && share < 0.9) misses.push(`${row.framework}: ${(share * 100).toFixed(1)} % of the bare route (target >= 90 %)`)
    lines.push(`| ${row.label} | ${Math.round(row.rps).toLocaleString('en-US')} | ${row.p99} ms | ${(share * 100).toFixed(1)} % |`)
  }
  const table = lines.join('\n')
  const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.versions.node }
  console.log(`\n${machine.cpu}, ${machine.cores} cores, Node ${machine.node}; ${connections} connections, ${duration} s per case after ${warmup} s warm-up, median of ${rounds} round(s)\n`)
  console.log(table)
  console.log(misses.length === 0 ? '\nall targets met' : `\ntargets missed:\n${misses.map((m) => `- ${m}`).join('\n')}`)
  if (!process.argv.includes('--no-write')) {
    const out = { date: new Date().toISOString(), machine, connections, duration, warmup, rounds, rows, table }
    writeFileSync(join(ROOT, 'docs/benchmarks-http.json'), `${JSON.stringify(out, null, 2)}\n`)
    console.error('bench:http: wrote docs/benchmarks-http.json')
  }
}
