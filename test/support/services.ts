/**
 * Suites that need a real server (redis-server, Postgres) or a runtime binary (Bun, Deno): where
 * it is missing they say why and skip, except under CI=true, where .ci/run installs everything
 * and a missing piece is a failure rather than a silent skip.
 */
import { existsSync } from 'node:fs'
import { describe, it } from 'vitest'

const CI = process.env.CI === 'true'

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
