/**
 * Postgres through the promote of a streaming standby while deliveries flow, on real processes
 * on 127.0.0.1 (tools/postgres-standby.mjs: initdb, pg_basebackup, a proxy in front that the
 * receiver's pg.Pool uses): kill -9 of the primary, the proxy moved to the standby while it is
 * still read-only (writes meet SQLSTATE 25006), `pg_ctl promote` 6 s later. The pool is never
 * restarted. 400 deliveries at 50/s (scaled down from the 2,000), then every delivery
 * resent; counted as the sender and the handler would count them. The ordered run sends them as
 * 20 conversations and counts, per conversation, runs at once and runs out of order too.
 */
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { PostgresInbox, PostgresStore } from 'svc-webhooks/postgres'
import { describeWithPostgres } from '../support/services.js'
import { runPostgresFailover } from '../../tools/failover.mjs'
import { startStandbyPair } from '../../tools/postgres-standby.mjs'

const SCENARIO_MS = 120_000

describeWithPostgres('Postgres standby promoted inside the sender\'s window', () => {
  describe('synchronous standby (synchronous_standby_names names it)', () => {
    it('PostgresStore: no failed answer, none lost, none run twice, the resend all duplicates', async () => {
      const figures = await runPostgresFailover({ path: 'store', synchronous: true })
      expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0, lost: 0, twice: 0, resendFailures: 0 })
      expect(figures.maxLatencyMs).toBeLessThan(10_000)
    }, SCENARIO_MS)

    it('PostgresInbox + worker: no failed answer, none lost, none run twice', async () => {
      const figures = await runPostgresFailover({ path: 'inbox', synchronous: true })
      expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0, lost: 0, twice: 0, resendFailures: 0 })
      expect(figures.maxLatencyMs).toBeLessThan(10_000)
    }, SCENARIO_MS)

    it('PostgresInbox + worker ordered by conversation (each completion leasing the next message): none lost, none run twice, never two of a conversation at once, none out of order', async () => {
      const figures = await runPostgresFailover({ path: 'inbox', synchronous: true, ordering: true })
      // Shown only when the test fails (vitest's silent: 'passed-only').
      console.log(figures)
      expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0, lost: 0, twice: 0, resendFailures: 0, overlapping: 0, outOfOrder: 0 })
      // The run goes through completions that lease the next message.
      expect(figures.chained).toBeGreaterThan(0)
      expect(figures.maxLatencyMs).toBeLessThan(10_000)
    }, SCENARIO_MS)
  })

  it('asynchronous standby: durabilityWarnings says so, a synchronous one has nothing to say', async () => {
    for (const synchronous of [false, true]) {
      const pair = await startStandbyPair({ synchronous })
      const pool = new pg.Pool({ connectionString: pair.primaryUrl })
      try {
        const store = await new PostgresStore({ pool }).durabilityWarnings()
        const inbox = await new PostgresInbox({ pool }).durabilityWarnings()
        if (synchronous) {
          expect(store).toEqual([])
          expect(inbox).toEqual([])
        } else {
          expect(store).toEqual([expect.stringMatching(/asynchronous standby/)])
          expect(inbox).toEqual([expect.stringMatching(/asynchronous standby/)])
        }
      } finally {
        await pool.end()
        await pair.stop()
      }
    }
  }, SCENARIO_MS)

  it('asynchronous standby, PostgresStore: no permanent 4xx and no failed answer; the loss is what the standby had not received (measured, printed)', async () => {
    const figures = await runPostgresFailover({ path: 'store', synchronous: false })
    console.log(`asynchronous standby, PostgresStore: ${JSON.stringify(figures)}`)
    expect(figures).toMatchObject({ maxConsecutiveFailures: 0, permanent: 0, neverDelivered: 0 })
  }, SCENARIO_MS)
})
