/**
 * Real Postgres for the PostgresStore suite: `initdb` into a temp dir and `pg_ctl start` on a
 * free port of 127.0.0.1 (unix socket in the temp dir, fsync off, trust auth), run as the
 * `postgres` user when the tests run as root (initdb refuses root). Where no Postgres binaries
 * are found the suite says so and skips; under CI=true it fails instead (.ci/run installs Postgres).
 */
import { spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'vitest'
import { freePort } from './free-port.mjs'

function findBinDir(): string | undefined {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR
  const onPath = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' })
  if (onPath.status === 0 && existsSync(join(onPath.stdout.trim(), 'initdb'))) return onPath.stdout.trim()
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
  versions.sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin')
}

const binDir = findBinDir()
const isRoot = userInfo().uid === 0
const postgresUser = isRoot ? spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }) : undefined
const postgresUid = postgresUser?.status === 0 ? Number(postgresUser.stdout.trim()) : undefined

/** Why the Postgres suite cannot run here, or undefined when it can. */
export const postgresSkipReason =
  binDir === undefined
    ? 'no Postgres binaries found (initdb, pg_ctl: set PG_BIN_DIR or install postgresql)'
    : isRoot && postgresUid === undefined
      ? 'running as root and no `postgres` user to run initdb as'
      : undefined

export interface PostgresServer {
  port: number
  /** Connection string for `pg` (user postgres, trust auth). */
  url: string
  /** Immediate shutdown (a crash, as far as clients can tell), keeping the data dir. */
  kill(): Promise<void>
  /** Starts it again on the same port after `kill`. */
  start(): Promise<void>
  /** Shutdown and removal of the data dir. */
  stop(): Promise<void>
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  const [cmd, ...rest] = isRoot ? ['runuser', '-u', 'postgres', '--', ...args] : args
  return new Promise((resolve) => {
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d: Buffer) => (output += d))
    child.stderr.on('data', (d: Buffer) => (output += d))
    child.once('exit', (code) => resolve({ code, output }))
  })
}

/**
 * Starts a throwaway Postgres cluster.
 *
 * @example
 * const pg = await startPostgresServer()
 * const pool = new pg.Pool({ connectionString: pg.url })
 */
export async function startPostgresServer(): Promise<PostgresServer> {
  if (postgresSkipReason !== undefined) throw new Error(postgresSkipReason)
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-pg-'))
  if (postgresUid !== undefined) chownSync(dir, postgresUid, -1)
  const data = join(dir, 'data')
  const port = await freePort()
  const init = await run([join(binDir!, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'])
  if (init.code !== 0) throw new Error(`initdb failed: ${init.output.slice(-500)}`)
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`
  const start = async () => {
    const started = await run([join(binDir!, 'pg_ctl'), '-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '60', 'start'])
    if (started.code !== 0) throw new Error(`pg_ctl start failed: ${started.output.slice(-500)}`)
  }
  const kill = async () => {
    await run([join(binDir!, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'])
  }
  await start()
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    kill,
    start,
    async stop() {
      await kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * `describe` that runs only where Postgres can be started: elsewhere it warns why and skips,
 * except under CI=true, where a missing Postgres is a failure.
 *
 * @example
 * describeWithPostgres('PostgresStore', () => { ... })
 */
export function describeWithPostgres(name: string, body: () => void): void {
  if (postgresSkipReason === undefined) {
    describe(name, body)
    return
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it('needs Postgres under CI', () => {
        throw new Error(`${postgresSkipReason}. CI=true: install it (the .ci/run script does).`)
      })
    })
    return
  }
  console.warn(`[svc-webhooks tests] ${name}: SKIPPED: ${postgresSkipReason}.`)
  describe.skip(name, body)
}
