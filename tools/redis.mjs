// @ts-check
// Starts a real `redis-server` on 127.0.0.1 (a free port, its own temp dir) and can kill -9,
// restart (same port and data dir), pause and resume it to inject faults, and stop it. One module
// for every caller: the vitest suites (a mock cannot show what a crash, a restart or a frozen
// server does to claims in flight), the soak and outage harness (tools/soak) and the benchmarks.
// Plain JS, so `node bench/...` and `npm run soak` (Node 20, no TypeScript loader) load it as is.
// Where redis-server is missing the suites say why and skip (their `describeWithRedis`); under
// CI=true they fail instead.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port.mjs'

/**
 * A running redis-server.
 *
 * @typedef {object} RedisServer
 * @property {number} port
 * @property {string} url `redis://127.0.0.1:<port>`
 * @property {number | undefined} pid The server's process id (changes on restart).
 * @property {() => Promise<void>} kill Crash: SIGKILL, nothing flushed beyond what `appendfsync` already wrote.
 * @property {() => Promise<void>} start Starts it again on the same port and data dir, after `kill`.
 * @property {(options?: { signal?: NodeJS.Signals }) => Promise<void>} restart Kills it (SIGKILL by default) and starts it again on the same port.
 * @property {() => void} pause Freezes the process (SIGSTOP): connections stay open, commands get no answer.
 * @property {() => void} resume
 * @property {() => Promise<void>} stop Stops it for good and removes its temp dir.
 */

/**
 * The redis-server binary: $REDIS_SERVER_BIN, else `redis-server` on PATH; undefined when absent.
 *
 * @returns {string | undefined}
 */
export function findRedisServer() {
  const bin = process.env.REDIS_SERVER_BIN || 'redis-server'
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return probe.status === 0 ? bin : undefined
}

/**
 * Why a redis-server cannot be started here, or undefined when it can.
 *
 * @returns {string | undefined}
 */
export function redisSkipReason() {
  return findRedisServer() ? undefined : 'redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN)'
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * One PING over a raw socket; resolves true on +PONG.
 *
 * @param {number} port
 * @returns {Promise<boolean>}
 */
function ping(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    /** @param {boolean} ok */
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
  })
}

/** @type {Set<import('node:child_process').ChildProcess>} */
const running = new Set()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Starts redis-server. `persist: true` turns on the append-only file with `appendfsync always`
 * (what a dedupe store should run with: a restart then forgets no processed id); otherwise no
 * automatic persistence (`--save '' --appendonly no`): only an explicit `SAVE` writes an RDB
 * snapshot, which a restart then loads (a restart from an older snapshot). `config` adds server
 * options, e.g. `['--maxmemory', '1mb']`.
 *
 * @param {{ persist?: boolean, config?: string[], bin?: string }} [options]
 * @returns {Promise<RedisServer>}
 * @example
 * const redis = await startRedisServer()
 * const client = new Redis(redis.url)
 * await redis.restart()   // same port, same data dir
 * await redis.stop()
 */
export async function startRedisServer({ persist = false, config = [], bin = findRedisServer() } = {}) {
  if (!bin) throw new Error('redis-server is not installed (apt-get install redis-server, or set REDIS_SERVER_BIN)')
  const redisBin = bin
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-redis-'))
  /** @type {{ proc: import('node:child_process').ChildProcess, exited: Promise<unknown>, paused: boolean } | undefined} */
  let current
  let log = ''

  async function start() {
    log = ''
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, '--loglevel', 'warning']
    args.push('--appendonly', persist ? 'yes' : 'no')
    if (persist) args.push('--appendfsync', 'always')
    args.push(...config)
    const proc = spawn(redisBin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    const exited = new Promise((resolve) => proc.once('exit', resolve))
    current = { proc, exited, paused: false }
    running.add(proc)
    exited.then(() => running.delete(proc))
    proc.stdout.on('data', (d) => (log += d))
    proc.stderr.on('data', (d) => (log += d))
    for (let i = 0; i < 200; i++) {
      if (proc.exitCode !== null || proc.signalCode !== null) break
      if (await ping(port)) return
      await sleep(25)
    }
    proc.kill('SIGKILL')
    throw new Error(`redis-server did not start on 127.0.0.1:${port}: ${log.trim().slice(-500)}`)
  }

  /** @param {NodeJS.Signals} signal */
  async function halt(signal) {
    const child = current
    if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return
    if (child.paused) child.proc.kill('SIGCONT')
    child.proc.kill(signal)
    await child.exited
  }

  await start()
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return current?.proc.pid
    },
    kill: () => halt('SIGKILL'),
    start,
    async restart({ signal = 'SIGKILL' } = {}) {
      await halt(signal)
      await start()
    },
    pause() {
      if (!current) return
      current.paused = true
      current.proc.kill('SIGSTOP')
    },
    resume() {
      if (!current) return
      current.paused = false
      current.proc.kill('SIGCONT')
    },
    async stop() {
      await halt('SIGTERM')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
