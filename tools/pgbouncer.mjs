// @ts-check
// A throwaway PgBouncer in transaction mode in front of a Postgres from tools/postgres.mjs: the
// pooler many deployments put between their processes and the database, which hands each
// transaction whichever server connection is free, so a statement a client prepared on one
// connection may be missing (or already there) on the next. Run as the `postgres` user when this
// runs as root (PgBouncer refuses root), on a free port of 127.0.0.1, daemonized with a pidfile.
import { spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port.mjs'
import { postgresUid, runAsPostgres } from './postgres.mjs'

/** @returns {string | undefined} the pgbouncer binary, or undefined when none is installed */
function findPgbouncer() {
  for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer']) if (existsSync(candidate)) return candidate
  const onPath = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' })
  return onPath.status === 0 && onPath.stdout.trim() ? onPath.stdout.trim() : undefined
}

/**
 * Why a PgBouncer cannot be started here, or undefined when it can.
 *
 * @returns {string | undefined}
 */
export function pgbouncerSkipReason() {
  return findPgbouncer() === undefined ? 'no pgbouncer binary (apt-get install pgbouncer)' : undefined
}

/** @param {number} port */
function accepting(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
  })
}

/**
 * Starts PgBouncer (`pool_mode = transaction`, `poolSize` server connections) in front of the
 * Postgres on `postgresPort`; `url` is what a pg Pool connects to.
 *
 * @param {{ postgresPort: number, poolSize?: number }} options
 * @returns {Promise<{ url: string, stop(): Promise<void> }>}
 * @example
 * const bouncer = await startPgbouncer({ postgresPort: server.port })
 * const pool = new pg.Pool({ connectionString: bouncer.url })
 */
export async function startPgbouncer({ postgresPort, poolSize = 2 }) {
  const binary = findPgbouncer()
  if (binary === undefined) throw new Error(/** @type {string} */ (pgbouncerSkipReason()))
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-pgbouncer-'))
  const uid = postgresUid()
  if (uid !== undefined) chownSync(dir, uid, -1)
  const port = await freePort()
  const config = join(dir, 'pgbouncer.ini')
  writeFileSync(
    config,
    [
      '[databases]',
      `postgres = host=127.0.0.1 port=${postgresPort} user=postgres dbname=postgres`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 200',
      `logfile = ${join(dir, 'log')}`,
      `pidfile = ${join(dir, 'pid')}`,
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
  )
  if (uid !== undefined) chownSync(config, uid, -1)
  const started = await runAsPostgres([binary, '-d', config])
  if (started.code !== 0) throw new Error(`pgbouncer did not start: ${started.output.slice(-500)}`)
  for (let waited = 0; !(await accepting(port)); waited += 50) {
    if (waited > 10_000) throw new Error(`pgbouncer did not listen within 10 s: ${existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').slice(-500) : ''}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      try {
        process.kill(Number(readFileSync(join(dir, 'pid'), 'utf8').trim()), 'SIGTERM')
      } catch {
        // Already gone.
      }
      for (let waited = 0; waited < 5000 && (await accepting(port)); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
