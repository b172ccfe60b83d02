/**
 * Real Postgres for the PostgresStore suite: `initdb` into a temp dir and `pg_ctl start` on a
 * free port of 127.0.0.1 (unix socket in the temp dir, fsync off, trust auth), run as the
 * `postgres` user when the tests run as root (initdb refuses root). Where no Postgres binaries
 * are found the suite says so and skips; under CI=true it fails instead (.ci/run installs Postgres).
 */
import { startPostgresServer as start, postgresSkipReason as reason } from './postgres-process.mjs'
import { describeWithService } from './services.js'

/** Why the Postgres suite cannot run here, or undefined when it can. */
export const postgresSkipReason = reason()

export interface PostgresServer {
  port: number
  /** Connection string for `pg` (user postgres, trust auth). */
  url: string
  /** Immediate shutdown (a crash, as far as clients can tell), keeping the data dir. */
  kill(): Promise<void>
  /** `kill -9` of the postmaster and every backend, keeping the data dir. */
  crash(): Promise<void>
  /** Starts it again on the same port after `kill`. */
  start(): Promise<void>
  /** Shutdown and removal of the data dir. */
  stop(): Promise<void>
}

/**
 * Starts a throwaway cluster for a suite: fsync off (unless `fsync: true`, for a suite about what
 * a crash keeps), 100 connections.
 *
 * @example
 * const pg = await startPostgresServer()
 * const pool = new pg.Pool({ connectionString: pg.url })
 */
export function startPostgresServer({ fsync = false }: { fsync?: boolean } = {}): Promise<PostgresServer> {
  return start({ fsync, maxConnections: 100 })
}

/**
 * `describe` that runs only where Postgres can be started: elsewhere it warns why and skips,
 * except under CI=true, where a missing Postgres is a failure.
 *
 * @example
 * describeWithPostgres('PostgresStore', () => { ... })
 */
export function describeWithPostgres(name: string, body: () => void): void {
  describeWithService(name, 'Postgres', postgresSkipReason, body)
}
