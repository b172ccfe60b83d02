/**
 * Suites that need a real server (redis-server, Postgres) or a runtime binary (Bun, Deno): where
 * it is missing they say why and skip, except under CI=true, where .ci/run installs everything
 * and a missing piece is a failure rather than a silent skip. The servers themselves are started
 * by tools/redis.mjs and tools/postgres.mjs (one module per service, shared with the soak and the
 * benchmarks).
 */
import { existsSync } from 'node:fs'
import { describe, it } from 'vitest'
import { postgresSkipReason as postgresReason } from '../../tools/postgres.mjs'
import { redisSkipReason as redisReason } from '../../tools/redis.mjs'

const CI = process.env.CI === 'true'

/** Why the Redis suites cannot run here, or undefined when redis-server is installed. */
export const redisSkipReason = redisReason()

/** Why the Postgres suites cannot run here, or undefined when a cluster can be started. */
export const postgresSkipReason = postgresReason()

/**
 * `describe` when `reason` is undefined; otherwise a skip that prints the reason, or under CI a
 * failing test that names it.
 *
 * @example
 * describeWithService('RedisStore', 'redis-server', redisSkipReason, () => { ... })
 */
export function describeWithService(name: string, service: string, reason: string | undefined, body: () => void): void {
  if (reason === undefined) {
    describe(name, body)
    return
  }
  if (CI) {
    describe(name, () => {
      it(`needs ${service} under CI`, () => {
        throw new Error(`${reason}. CI=true: install it (the .ci/run script does).`)
      })
    })
    return
  }
  console.warn(`[svc-webhooks tests] ${name}: SKIPPED: ${reason}.`)
  describe.skip(`${name} (skipped: ${reason})`, body)
}

/**
 * `it` when `binary` exists; otherwise a skip whose title says which binary is missing and what
 * installs it, or under CI a test that fails at once with that reason.
 *
 * @example
 * itNeeding(bunBinary)('examples/bun answers 200', async () => { ... })
 */
export function itNeeding(binary: string): (name: string, body: () => Promise<void> | void, timeout?: number) => void {
  if (existsSync(binary)) return it
  const reason = `${binary} is not installed (npm ci in scripts/runtime-binaries installs it)`
  if (CI) {
    return (name) =>
      it(`${name} (needs ${binary} under CI)`, () => {
        throw new Error(`${reason}. CI=true: install it (the .ci/run script does).`)
      })
  }
  console.warn(`[svc-webhooks tests] skipping: ${reason}`)
  return (name, body, timeout) => it.skip(`${name} (skipped: ${reason})`, body, timeout)
}

/**
 * `describe` that runs only where redis-server exists: elsewhere it warns and skips, except
 * under CI=true, where a missing server is a failure.
 *
 * @example
 * describeWithRedis('RedisStore', () => { ... })
 */
export function describeWithRedis(name: string, body: () => void): void {
  describeWithService(name, 'redis-server', redisSkipReason, body)
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
