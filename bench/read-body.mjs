/**
 * `node bench/read-body.mjs`: what reading a request body costs a Fetch server, per way of
 * reading it (bench/read-body-server.mjs): `arrayBuffer()` (the floor route's read in bench:http,
 * unbounded) and the package's bounded `readRequestBody`. Each runtime (Bun, Deno, Node through
 * @hono/node-server; the binaries of scripts/runtime-binaries) serves both on core 1 while autocannon loads it from core 0,
 * 16 connections, one way after another in an order that rotates every round. The figure is the
 * server process's CPU time per request (/proc/<pid>/stat), the median of the rounds: on a
 * machine where the load generator saturates its core before the server does, requests/s cannot
 * tell the reads apart, the server's CPU can. Expects a fresh build (`npx tsup`).
 *
 * Options: --runtimes bun,deno,node  --rounds 3  --duration 3 (seconds per way and round)  --size 1024
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SERVER = join(ROOT, 'bench/read-body-server.mjs')
const BINARIES = join(ROOT, 'scripts/runtime-binaries/node_modules')
const READS = ['/arrayBuffer', '/package']

function option(name, fallback) {
  const i = process.argv.indexOf(name)
  return i === -1 ? fallback : process.argv[i + 1]
}
const runtimes = String(option('--runtimes', 'bun,deno,node')).split(',')
const rounds = Number(option('--rounds', 3))
const duration = Number(option('--duration', 3))
const size = Number(option('--size', 1024))
for (const [name, value, max] of [['rounds', rounds, 9], ['duration', duration, 60], ['size', size, 1024 * 1024]]) {
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`bench:read-body: --${name} takes 1 to ${max}`)
}

function emptyTsconfig() {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'tsconfig.json')
  writeFileSync(file, '{}\n')
  return file
}
const COMMANDS = {
  // Bun applies the cwd's tsconfig.json `paths` (they map `#crypto` to the type-only contract).
  bun: () => [join(BINARIES, '@oven/bun-linux-x64/bin/bun'), `--tsconfig-override=${emptyTsconfig()}`, SERVER],
  deno: () => [join(BINARIES, '@deno/linux-x64-glibc/deno'), 'run', '--node-modules-dir=manual', '--no-lock', '--allow-net=127.0.0.1', `--allow-read=${ROOT}`, '--allow-env', SERVER],
  node: () => [process.execPath, SERVER],
}

const pinned = process.platform === 'linux' && cpus().length >= 2 && existsSync('/usr/bin/taskset')

/** CPU time (user + system) of a process, in µs: utime and stime of /proc/<pid>/stat, in 1/100 s. */
function cpuMicros(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10_000
}

async function start(runtime) {
  const [command, ...args] = COMMANDS[runtime]()
  if (!existsSync(command)) return undefined
  const child = pinned ? spawn('/usr/bin/taskset', ['-c', '1', command, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] }) : spawn(command, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench:read-body: ${runtime} did not start within 30 s`)), 30_000)
    createInterface({ input: child.stdout }).once('line', (line) => (clearTimeout(timer), resolve(JSON.parse(line).port)))
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`bench:read-body: ${runtime} exited (${code})`))))
  })
  const stop = () => new Promise((resolve) => {
    const timer = setTimeout(() => (child.kill('SIGKILL'), resolve()), 5_000)
    child.once('exit', () => (clearTimeout(timer), resolve()))
    child.stdin.end()
  })
  return { port, pid: child.pid, stop }
}

if (pinned && process.env.SVC_BENCH_PINNED !== '1') {
  const child = spawn('/usr/bin/taskset', ['-c', '0', process.execPath, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, SVC_BENCH_PINNED: '1' } })
  process.exitCode = await new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)))
} else {
  const { default: autocannon } = await import('autocannon')
  const body = 'x'.repeat(size)
  const load = (port, path, seconds) => autocannon({ url: `http://127.0.0.1:${port}${path}`, method: 'POST', body, connections: 16, duration: seconds })
  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
  const lines = ['| runtime | arrayBuffer() µs/req | readRequestBody µs/req (× arrayBuffer) |', '|---|---:|---:|']
  for (const runtime of runtimes) {
    const server = await start(runtime)
    if (server === undefined) {
      console.error(`bench:read-body: ${runtime} is not installed, skipped`)
      continue
    }
    const cpu = Object.fromEntries(READS.map((read) => [read, []]))
    try {
      for (let round = 0; round < rounds; round++) {
        for (let i = 0; i < READS.length; i++) {
          const read = READS[(i + round) % READS.length]
          await load(server.port, read, 1)
          const before = cpuMicros(server.pid)
          const result = await load(server.port, read, duration)
          const perRequest = (cpuMicros(server.pid) - before) / result.requests.total
          if (result.non2xx > 0 || result.errors > 0) throw new Error(`bench:read-body: ${runtime} ${read}: ${result.non2xx} non-2xx, ${result.errors} errors`)
          cpu[read].push(perRequest)
          console.error(`  round ${round + 1}: ${runtime.padEnd(5)} ${read.padEnd(13)} ${Math.round(result.requests.average)} req/s, server CPU ${perRequest.toFixed(1)} µs/req`)
        }
      }
    } finally {
      await server.stop()
    }
    // The ratio of each round (the reads measured seconds apart), then the median.
    const ratio = (read) => median(cpu[read].map((x, i) => x / cpu['/arrayBuffer'][i])).toFixed(2)
    lines.push(`| ${runtime} | ${median(cpu['/arrayBuffer']).toFixed(1)} | ${median(cpu['/package']).toFixed(1)} (${ratio('/package')}×) |`)
  }
  console.log(`\n${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores; ${size} B bodies, 16 connections, ${duration} s per read and round, median of ${rounds} round(s)${pinned ? '; load generator on core 0, server on core 1' : ''}\n`)
  console.log(lines.join('\n'))
}
