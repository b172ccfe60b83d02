/**
 * `npm run bench:http`: receiver throughput over real HTTP on 127.0.0.1 (autocannon 9, pinned).
 * For each server (Express, Hono on @hono/node-server, Fastify, node:http, and Bun.serve /
 * Deno.serve when their binaries are installed in scripts/runtime-binaries), three routes in
 * their own process (bench/http-servers.mjs):
 * - bare: reads the body and answers;
 * - floor: bare plus what any verifying receiver must do (v2 HMAC, constant-time compare,
 *   JSON.parse), the HMAC the cheapest way known (bench/floor.mjs): the physical floor;
 * - webhooks: the package's entry for that server (verify, MemoryStore claim/complete, handler, answer);
 * - forged: the same entry, default log on, sent forged deliveries (well-formed and fresh, signed
 *   with a secret it does not hold): every one refused 401, as a flood from anyone on the
 *   internet would be;
 * - telemetry: the webhooks entry with `telemetry: openTelemetry()` over a recording SDK (spans
 *   batched to an exporter that drops them, metrics aggregated);
 * - telemetry-als: the same with the AsyncLocalStorage context manager `NodeSDK` registers (Node
 *   runtimes only; Bun and Deno rows show n/a);
 * - telemetry-sdk: the same SDK called directly for the same span and metrics, without the
 *   package's `openTelemetry()`: what the SDK itself costs, to read the package's cost against.
 * Every request is a distinct delivery, signed as it is sent (fresh id and timestamp), so the
 * webhooks route claims, runs and completes every one, and no pool can run out however fast the
 * machine is. Targets: the receiver at >= 90 % of its floor route's requests/s, and refusing
 * forged deliveries at >= 95 % of the receiver's (refusing costs no more than accepting), and the
 * receiver with telemetry at >= 85 % of without. Writes
 * docs/benchmarks-http.json.
 *
 * Options: --duration 5 (seconds measured per case), --warmup 2, --rounds 2, --connections 16,
 * --servers express,hono,fastify,node,bun,deno, --modes (a subset of the routes, e.g.
 * webhooks,telemetry,telemetry-als; the columns of the others show n/a), --no-write.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SERVERS_FILE = join(ROOT, 'bench/http-servers.mjs')
const SECRET = 'svc_whsec_YmVuY2gtc2VjcmV0LWh0dHAtMzItYnl0ZXMtLS0'
const PATH = '/webhooks/svc'
const BINARIES = join(ROOT, 'scripts/runtime-binaries/node_modules')
const RUNTIMES = {
  node: { command: process.execPath, args: [SERVERS_FILE] },
  // Bun applies the cwd's tsconfig.json `paths` at run time (they map `#crypto` to the type-only
  // contract): give it an empty tsconfig so it resolves the package as users install it.
  bun: { command: join(BINARIES, '@oven/bun-linux-x64/bin/bun'), args: [`--tsconfig-override=${emptyTsconfig()}`, SERVERS_FILE] },
  deno: {
    command: join(BINARIES, '@deno/linux-x64-glibc/deno'),
    args: ['run', '--node-modules-dir=manual', '--no-lock', '--allow-net=127.0.0.1', `--allow-read=${ROOT}`, '--allow-env', SERVERS_FILE],
  },
}
const SERVERS = [
  { name: 'express', runtime: 'node', server: 'express', label: 'Express 5' },
  { name: 'hono', runtime: 'node', server: 'hono', label: 'Hono on @hono/node-server' },
  { name: 'fastify', runtime: 'node', server: 'fastify', label: 'Fastify 5' },
  { name: 'node', runtime: 'node', server: 'node', label: 'node:http' },
  { name: 'bun', runtime: 'bun', server: 'fetch', label: 'Bun.serve, svc-webhooks/fetch' },
  { name: 'deno', runtime: 'deno', server: 'fetch', label: 'Deno.serve, svc-webhooks/fetch' },
]
const MODES = ['bare', 'floor', 'webhooks', 'forged', 'telemetry', 'telemetry-als', 'telemetry-sdk']

const PIN = pinning()
if (PIN === 'parent') process.exit(await rerunPinned())
await main()

/** 'server' when this process is pinned to core 0 and servers go to core 1; 'parent' when it must re-run itself so; undefined otherwise. */
function pinning() {
  if (process.env.SVC_BENCH_PINNED === '1') return 'server'
  if (process.platform !== 'linux' || cpus().length < 2 || !existsSync('/usr/bin/taskset')) return undefined
  return 'parent'
}

function rerunPinned() {
  const child = spawn('/usr/bin/taskset', ['-c', '0', process.execPath, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, SVC_BENCH_PINNED: '1' },
  })
  return new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)))
}

/** CPU time (user + system) a process has used, in µs, or undefined where /proc is not there. */
function cpuMicros(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    // utime and stime (fields 14 and 15 of stat), in clock ticks of 1/100 s on Linux.
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}

function emptyTsconfig() {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'tsconfig.json')
  writeFileSync(file, '{}\n')
  return file
}

/** Starts one server process; resolves its port and a stop function. */
async function startServer(runtime, server, mode) {
  const { command, args } = RUNTIMES[runtime]
  const argv = [...args, server, mode]
  // taskset execs the server itself: the child's pid is the server's.
  const child = PIN === 'server' ? spawn('/usr/bin/taskset', ['-c', '1', command, ...argv], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] }) : spawn(command, argv, { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  const stop = () =>
    new Promise((resolve) => {
      const timer = setTimeout(() => (child.kill('SIGKILL'), resolve()), 5_000)
      child.once('exit', () => (clearTimeout(timer), resolve()))
      child.stdin.end()
      child.kill('SIGTERM')
    })
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench:http: ${runtime} ${server} ${mode} did not start within 30 s`)), 30_000)
    createInterface({ input: child.stdout }).once('line', (line) => (clearTimeout(timer), resolve(JSON.parse(line).port)))
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`bench:http: ${runtime} ${server} ${mode} exited (${code})`))))
  })
  return { port, stop, pid: child.pid }
}

function fail(message) {
  throw new Error(`bench:http: ${message}`)
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
  const servers = (process.argv.includes('--servers') ? String(process.argv[process.argv.indexOf('--servers') + 1]).split(',') : SERVERS.map((x) => x.name))
    .map((name) => SERVERS.find((x) => x.name === name) ?? fail(`unknown server ${name}`))
    .filter((x) => {
      if (existsSync(RUNTIMES[x.runtime].command)) return true
      console.error(`bench:http: skipping ${x.label}: ${RUNTIMES[x.runtime].command} is not installed (npm ci in scripts/runtime-binaries)`)
      return false
    })

  // Each request is signed as autocannon sends it: a fresh id and the current second.
  const { createHmac, createSecretKey } = await import('node:crypto')
  const key = createSecretKey(Buffer.from(SECRET, 'utf8'))
  // Forged deliveries cost the server the same HMAC: signed, with a key it does not hold.
  const forgedKey = createSecretKey(Buffer.from('svc_whsec_NotTheServersSecretForgedDeliveries', 'utf8'))
  const first = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id: 'warm' })
  const base = { ...first.headers }
  delete base['svc-webhook-signature'] // v2 only, as the service's current deliveries verify
  let sequence = 0
  function sign(signingKey = key) {
    const timestamp = String(Math.floor(Date.now() / 1000))
    const id = `evt_${process.pid}_${sequence++}`
    const v2 = createHmac('sha256', signingKey).update(`${id}.${timestamp}.`).update(first.rawBody).digest('hex')
    return { ...base, 'svc-webhook-id': id, 'svc-webhook-timestamp': timestamp, 'svc-webhook-signature-v2': `v2=${v2}` }
  }

  async function load(port, seconds, mode) {
    const signingKey = mode === 'forged' ? forgedKey : key
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections,
      duration: seconds,
      requests: [{ method: 'POST', path: PATH, setupRequest: (request) => ({ ...request, headers: sign(signingKey), body: first.body }) }],
    })
    return {
      rps: result.requests.average,
      requests: result.requests.total,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      ok2xx: result['2xx'],
      errors: result.errors + result.timeouts,
    }
  }

  const modes = process.argv.includes('--modes') ? String(process.argv[process.argv.indexOf('--modes') + 1]).split(',') : MODES
  for (const mode of modes) if (!MODES.includes(mode)) fail(`unknown mode ${mode}`)
  // The AsyncLocalStorage context manager is Node's: Bun and Deno rows run without it.
  const results = servers.flatMap((s) => modes.filter((mode) => mode !== 'telemetry-als' || s.runtime === 'node').map((mode) => ({ ...s, mode, rounds: [] })))
  for (let round = 0; round < rounds; round++) {
    // Each server's routes back to back, in an order that rotates every round, so a machine
    // that speeds up or slows down during a round does not favour one route.
    const order = servers.flatMap((s) => {
      const own = results.filter((r) => r.name === s.name)
      return own.map((_, i) => own[(i + round) % own.length])
    })
    for (const result of order) {
      const { port, stop, pid } = await startServer(result.runtime, result.server, result.mode)
      try {
        await load(port, warmup, result.mode)
        const cpuBefore = cpuMicros(pid)
        const measured = await load(port, duration, result.mode)
        const cpuAfter = cpuMicros(pid)
        measured.cpuUsPerRequest = cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / measured.requests
        // Forged deliveries must all be refused; every other route must answer them all 2xx.
        if (result.mode === 'forged' ? measured.ok2xx > 0 || measured.errors > 0 : measured.non2xx > 0 || measured.errors > 0) {
          throw new Error(`bench:http: ${result.label} ${result.mode}: ${measured.ok2xx} 2xx and ${measured.non2xx} non-2xx answers, ${measured.errors} errors`)
        }
        result.rounds.push(measured)
        console.error(`  round ${round + 1}: ${`${result.label}, ${result.mode}`.padEnd(48)} ${Math.round(measured.rps)} req/s, p99 ${measured.p99} ms${measured.cpuUsPerRequest === undefined ? '' : `, server CPU ${measured.cpuUsPerRequest.toFixed(1)} µs/req`}`)
      } finally {
        await stop()
      }
    }
  }

  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
  const cpuOf = (r) => (r.rounds.every((x) => x.cpuUsPerRequest !== undefined) ? median(r.rounds.map((x) => x.cpuUsPerRequest)) : undefined)
  const rows = results.map((r) => ({ ...r, rps: median(r.rounds.map((x) => x.rps)), p99: median(r.rounds.map((x) => x.p99)), cpuUsPerRequest: cpuOf(r) }))
  const lines = [
    '| server | bare req/s | floor req/s | receiver req/s | receiver vs floor | receiver p99 | server CPU µs/req: floor, receiver (ratio) | refusing forged req/s | refusing vs receiver | refusing CPU µs/req | with telemetry req/s | telemetry vs receiver | telemetry CPU µs/req | telemetry + AsyncLocalStorage req/s | vs receiver | bare SDK calls req/s | vs receiver | bare SDK CPU µs/req |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  const misses = []
  const fmt = (n) => Math.round(n).toLocaleString('en-US')
  const na = 'n/a'
  for (const s of servers) {
    const [bare, floorRow, receiver, forged, traced, tracedAls, bareSdk] = MODES.map((mode) => rows.find((r) => r.name === s.name && r.mode === mode))
    // The ratio of each round (a row and its baseline measured minutes apart at most), then the median.
    const ratio = (row, baseline) => (row && baseline ? median(row.rounds.map((x, i) => x.rps / baseline.rounds[i].rps)) : undefined)
    const pct = (share) => (share === undefined ? na : `${(share * 100).toFixed(1)} %`)
    const rate = (row) => (row ? fmt(row.rps) : na)
    const cpuUs = (row) => (row?.cpuUsPerRequest === undefined ? na : row.cpuUsPerRequest.toFixed(1))
    const share = ratio(receiver, floorRow)
    if (share !== undefined && share < 0.9) misses.push(`${s.label}: ${(share * 100).toFixed(1)} % of the floor route (target >= 90 %)`)
    const refusing = ratio(forged, receiver)
    if (refusing !== undefined && refusing < 0.95) misses.push(`${s.label}: refusing forged deliveries at ${(refusing * 100).toFixed(1)} % of the receiver's rate (target >= 95 %)`)
    const tracing = ratio(traced, receiver)
    if (tracing !== undefined && tracing < 0.85) misses.push(`${s.label}: with a recording OpenTelemetry SDK at ${(tracing * 100).toFixed(1)} % of the receiver's rate (target >= 85 %)`)
    const tracingAls = ratio(tracedAls, receiver)
    if (tracingAls !== undefined && tracingAls < 0.85) misses.push(`${s.label}: with a recording OpenTelemetry SDK and AsyncLocalStorage at ${(tracingAls * 100).toFixed(1)} % of the receiver's rate (target >= 85 %)`)
    const cpu =
      floorRow?.cpuUsPerRequest === undefined || receiver?.cpuUsPerRequest === undefined
        ? na
        : `${floorRow.cpuUsPerRequest.toFixed(1)}, ${receiver.cpuUsPerRequest.toFixed(1)} (${(receiver.cpuUsPerRequest / floorRow.cpuUsPerRequest).toFixed(2)}×)`
    lines.push(`| ${s.label} | ${rate(bare)} | ${rate(floorRow)} | ${rate(receiver)} | ${pct(share)} | ${receiver ? `${receiver.p99} ms` : na} | ${cpu} | ${rate(forged)} | ${pct(refusing)} | ${cpuUs(forged)} | ${rate(traced)} | ${pct(tracing)} | ${cpuUs(traced)} | ${rate(tracedAls)} | ${pct(tracingAls)} | ${rate(bareSdk)} | ${pct(ratio(bareSdk, receiver))} | ${cpuUs(bareSdk)} |`)
  }
  const table = lines.join('\n')
  const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.versions.node, pinned: PIN === 'server' ? 'load generator on core 0, server on core 1' : 'not pinned' }
  console.log(`\n${machine.cpu}, ${machine.cores} cores, Node ${machine.node}; ${connections} connections, ${duration} s per case after ${warmup} s warm-up, median of ${rounds} round(s); ${machine.pinned}\n`)
  console.log(table)
  console.log(misses.length === 0 ? '\nall targets met' : `\ntargets missed:\n${misses.map((m) => `- ${m}`).join('\n')}`)
  if (!process.argv.includes('--no-write')) {
    const out = { date: new Date().toISOString(), machine, connections, duration, warmup, rounds, rows, table }
    writeFileSync(join(ROOT, 'docs/benchmarks-http.json'), `${JSON.stringify(out, null, 2)}\n`)
    console.error('bench:http: wrote docs/benchmarks-http.json')
  }
}
