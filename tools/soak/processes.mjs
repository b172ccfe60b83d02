// @ts-check
// The soaks' child processes (receivers, inbox workers): start one with its environment, wait for
// its "READY [port]" line, kill it (SIGKILL, to crash it mid-run) or stop it (SIGTERM, then its
// "STATS <json>" line is read back).
import { spawn } from 'node:child_process'

/**
 * @typedef {object} SoakChild
 * @property {string} name
 * @property {number | undefined} pid
 * @property {Promise<string>} ready resolves with what followed READY (a port, or '')
 * @property {() => Promise<void>} kill SIGKILL: a crash, nothing flushed, no STATS
 * @property {() => Promise<Record<string, unknown>>} stop SIGTERM, then its STATS (or `{ error }`)
 * @property {() => boolean} alive
 * @property {Promise<void>} exited resolves when the process has exited, however it ended
 */

/** Keeps the last `max` characters of a stream, so a chatty child cannot grow memory without bound. */
const tail = (text = '', max = 4000) => (text.length > max ? text.slice(-max) : text)

/**
 * Starts `node <script>` with `env` added to this process's environment.
 *
 * @param {{ name: string, script: string, env: Record<string, string>, startTimeoutMs?: number }} options
 * @returns {SoakChild}
 * @example
 * const child = startChild({ name: 'worker 1', script: join(here, 'worker.mjs'), env: { SOAK_ENGINE: 'redis' } })
 * await child.ready
 * await child.kill()
 */
export function startChild({ name, script, env, startTimeoutMs = 30_000 }) {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stderr.on('data', (d) => (err = tail(err + d)))
  /** @type {Promise<void>} */
  const exited = new Promise((resolve) => child.once('exit', () => resolve()))
  const alive = () => child.exitCode === null && child.signalCode === null
  /** @type {Promise<string>} */
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start: ${err.slice(-500)}`)), startTimeoutMs)
    child.stdout.on('data', (d) => {
      // Only READY and STATS are ever printed: keep what matters, bounded.
      out = tail(out + d, 1_000_000)
      const match = /READY ?(\d*)/.exec(out)
      if (match) {
        clearTimeout(timer)
        resolve(match[1] ?? '')
      }
    })
    exited.then(() => {
      clearTimeout(timer)
      reject(new Error(`${name} exited: ${err.slice(-500)}`))
    })
  })
  ready.catch(() => undefined)
  return {
    name,
    pid: child.pid,
    ready,
    alive,
    exited,
    async kill() {
      if (alive()) {
        child.kill('SIGKILL')
        await exited
      }
    },
    async stop() {
      if (alive()) {
        child.kill('SIGTERM')
        const forced = setTimeout(() => child.kill('SIGKILL'), 10_000)
        await exited
        clearTimeout(forced)
      }
      const stats = /STATS (.*)/.exec(out)?.[1]
      return stats ? JSON.parse(stats) : { error: err.slice(-300) || `no STATS from ${name}` }
    },
  }
}
