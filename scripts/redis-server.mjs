// Starts a real `redis-server` on 127.0.0.1 (a free port, its own temp dir) for the RedisStore
// tests and the soak, and can kill, restart (same port), pause and resume it to inject faults.
// Plain JS so `npm run soak` (Node 20, no TypeScript loader) and the vitest suites share it.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The redis-server binary: $REDIS_SERVER_BIN, else `redis-server` on PATH; undefined when absent. */
export function findRedisServer() {
  const bin = process.env.REDIS_SERVER_BIN || 'redis-server'
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  return probe.status === 0 ? bin : undefined
}

/** A free TCP port on 127.0.0.1 (asked from the kernel, then released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** One PING over a raw socket; resolves true on +PONG. */
function ping(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
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

const running = new Set()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Starts redis-server. `persist: true` turns on the append-only file with `appendfsync always`
 * (what a dedupe store should run with: a restart then forgets no processed id); otherwise no
 * persistence at all (`--save '' --appendonly no`).
 *
 * @example
 * const redis = await startRedisServer()
 * const client = new Redis(redis.url)
 * await redis.restart()   // same port, same data dir
 * await redis.stop()
 */
export async function startRedisServer({ persist = false, bin = findRedisServer() } = {}) {
  if (!bin) throw new Error('redis-server is not installed (apt-get install redis-server, or set REDIS_SERVER_BIN)')
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-redis-'))
  let child
  let log = ''

  async function start() {
    log = ''
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, '--loglevel', 'warning']
    args.push('--appendonly', persist ? 'yes' : 'no')
    if (persist) args.push('--appendfsync', 'always')
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    child = proc
    running.add(proc)
    const exited = new Promise((resolve) => proc.once('exit', resolve))
    proc.exited = exited
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

  async function halt(signal) {
    const proc = child
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return
    if (proc.killedBy === 'SIGSTOP') proc.kill('SIGCONT')
    proc.kill(signal)
    await proc.exited
  }

  await start()
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    /** The server's process id (changes on restart). */
    get pid() {
      return child.pid
    },
    /** Crash: SIGKILL, nothing flushed beyond what `appendfsync` already wrote. */
    kill: () => halt('SIGKILL'),
    /** Starts it again on the same port and data dir, after `kill` or `shutdown`. */
    start,
    /** Kills it (SIGKILL by default) and starts it again on the same port. */
    async restart({ signal = 'SIGKILL' } = {}) {
      await halt(signal)
      await start()
    },
    /** Freezes the process (SIGSTOP): connections stay open, commands get no answer. */
    pause() {
      child.killedBy = 'SIGSTOP'
      child.kill('SIGSTOP')
    },
    resume() {
      child.killedBy = undefined
      child.kill('SIGCONT')
    },
    /** Stops it for good and removes its temp dir. */
    async stop() {
      await halt('SIGTERM')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
