// @ts-check
// A throwaway Postgres: `initdb` into a temp dir and `pg_ctl start` on a free port of 127.0.0.1
// (unix socket in the temp dir, trust auth), run as the `postgres` user when this runs as root
// (initdb refuses root); it can be shut down immediately, killed -9, started again on the same
// port and stopped. One module for every caller: the vitest suites, the soak and outage harness
// (tools/soak) and the benchmarks. Plain JS, so `node bench/...` and `npm run soak` (Node 20, no
// TypeScript loader) load it as is. Where no Postgres can be started the suites say why and skip
// (their `describeWithPostgres`); under CI=true they fail instead.
import { spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port.mjs'

/**
 * The directory holding initdb and pg_ctl: $PG_BIN_DIR, `pg_config --bindir`, or the newest
 * /usr/lib/postgresql/<version>/bin; undefined when none is found.
 *
 * @returns {string | undefined}
 */
export function findPostgresBinDir() {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR
  const onPath = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' })
  if (onPath.status === 0 && existsSync(join(onPath.stdout.trim(), 'initdb'))) return onPath.stdout.trim()
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
  versions.sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin')
}

const isRoot = userInfo().uid === 0

/** @returns {number | undefined} */
export function postgresUid() {
  const probe = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' })
  return probe.status === 0 ? Number(probe.stdout.trim()) : undefined
}

/**
 * Why a Postgres cannot be started here, or undefined when it can.
 *
 * @returns {string | undefined}
 */
export function postgresSkipReason() {
  if (findPostgresBinDir() === undefined) return 'no Postgres binaries found (initdb, pg_ctl: set PG_BIN_DIR or install postgresql)'
  if (isRoot && postgresUid() === undefined) return 'running as root and no `postgres` user to run initdb as'
  return undefined
}

/**
 * Runs a Postgres binary, as the `postgres` user when this process is root (initdb refuses root).
 *
 * @param {string[]} args
 * @returns {Promise<{ code: number | null, output: string }>}
 */
export function runAsPostgres(args) {
  const [cmd, ...rest] = isRoot ? ['runuser', '-u', 'postgres', '--', ...args] : args
  return new Promise((resolve) => {
    const child = spawn(/** @type {string} */ (cmd), rest, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    child.once('exit', (code) => resolve({ code, output }))
  })
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The process `pid` and its children (from /proc), for a crash of the whole cluster.
 *
 * @param {number} pid
 * @returns {number[]}
 */
function withChildren(pid) {
  const found = [pid]
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // Field 4 of /proc/<pid>/stat is the parent; the name (field 2) may hold spaces, so read after its ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (parent === pid) found.push(Number(entry))
    } catch {
      // It exited while we looked.
    }
  }
  return found
}

/**
 * Whether process `pid` still runs (a zombie, killed and not yet reaped, does not).
 *
 * @param {number} pid
 */
function alive(pid) {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ')
  } catch {
    return false
  }
}

/**
 * kill -9 of the postmaster whose data dir is `data` and of its children (read from /proc);
 * resolves once they are gone (bounded: a SIGKILLed process is reaped within milliseconds).
 *
 * @param {string} data
 */
export async function killPostmaster(data) {
  const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  const victims = withChildren(postmaster)
  for (const pid of victims) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
  for (let i = 0; i < 200 && victims.some(alive); i++) await sleep(25)
}

/**
 * A running Postgres cluster.
 *
 * @typedef {object} PostgresServer
 * @property {number} port
 * @property {string} url Connection string for `pg` (user postgres, trust auth).
 * @property {() => Promise<void>} kill Immediate shutdown (a crash, as far as clients can tell: recovery replays the WAL on the next start), keeping the data dir.
 * @property {() => Promise<void>} crash `kill -9` of the postmaster and every backend (Linux: read from /proc), keeping the data dir.
 * @property {() => Promise<void>} start Starts it again on the same port after `kill` or `crash`.
 * @property {() => Promise<void>} stop Shutdown and removal of the data dir.
 * @property {number | undefined} pid The postmaster's (its backends are its children), while it runs.
 */

/**
 * Starts a throwaway cluster. The defaults suit a test suite: fsync off (speed) and 100
 * connections; `fsync: true` for a run about what a crash keeps (the soak, the outage
 * experiment, a durable benchmark setting).
 *
 * @param {{ fsync?: boolean, maxConnections?: number }} [options]
 * @returns {Promise<PostgresServer>}
 * @example
 * const pg = await startPostgresServer()
 * const pool = new Pool({ connectionString: pg.url })
 * await pg.crash()   // kill -9; the data dir stays
 * await pg.start()   // same port, recovery on start
 * await pg.stop()
 */
export async function startPostgresServer({ fsync = false, maxConnections = 100 } = {}) {
  const reason = postgresSkipReason()
  if (reason) throw new Error(reason)
  const binDir = /** @type {string} */ (findPostgresBinDir())
  const uid = isRoot ? postgresUid() : undefined
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-pg-'))
  if (uid !== undefined) chownSync(dir, uid, -1)
  const data = join(dir, 'data')
  const port = await freePort()
  const init = await runAsPostgres([join(binDir, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
  if (init.code !== 0) throw new Error(`initdb failed: ${init.output.slice(-500)}`)
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=${maxConnections}${fsync ? '' : ' -c fsync=off'}`
  const start = async () => {
    const started = await runAsPostgres([join(binDir, 'pg_ctl'), '-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '60', 'start'])
    if (started.code !== 0) {
      const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').slice(-500) : ''
      throw new Error(`pg_ctl start failed: ${started.output.slice(-500)}\n${log}`)
    }
  }
  const kill = async () => {
    await runAsPostgres([join(binDir, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'])
  }
  const crash = async () => {
    await killPostmaster(data)
    // The killed postmaster stays a zombie where PID 1 does not reap orphans (a container), and
    // Postgres takes a pid that still exists for a running postmaster: the lock files (data dir
    // and socket) go, as a reaped process would have let the next start remove them.
    rmSync(join(data, 'postmaster.pid'), { force: true })
    rmSync(join(dir, `.s.PGSQL.${port}.lock`), { force: true })
  }
  await start()
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    get pid() {
      try {
        return Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined
      } catch {
        return undefined
      }
    },
    kill,
    crash,
    start,
    async stop() {
      await kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
