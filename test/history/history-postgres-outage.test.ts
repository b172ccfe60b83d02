/**
 * PostgresHistory through a real Postgres killed with SIGKILL mid-traffic (postmaster and every
 * backend, tools/postgres.mjs `crash`), then started again: every delivery keeps the answer it
 * would get without a history (200 processed, 500 handler_failed) and never waits for the dead
 * server; the lost records are counted in `stats().failed` and logged; once the server is back,
 * recording resumes with no new failures.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import pg from 'pg'
import { createNodeHandler } from 'svc-webhooks/node'
import { PostgresHistory } from 'svc-webhooks/postgres'
import { signWebhook } from 'svc-webhooks/testing'
import { listen, type RunningServer } from '../support/servers.js'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'

const SECRET = 'svc_whsec_aGlzdG9yeS1vdXRhZ2UtdGVzdC1zZWNyZXQtZG8tbm90'

describeWithPostgres('PostgresHistory outage: the server killed -9 and restarted', () => {
  let database: PostgresServer
  let pool: pg.Pool
  let history: PostgresHistory
  let receiver: RunningServer
  const lines: string[] = []

  beforeAll(async () => {
    database = await startPostgresServer()
    pool = new pg.Pool({ connectionString: database.url, max: 4, connectionTimeoutMillis: 300 })
    // Idle clients of a killed server emit 'error'; the pool drops them and connects anew.
    pool.on('error', () => {})
    history = new PostgresHistory({ pool, table: 'outage_history', timeoutMs: 300, log: (line) => lines.push(line) })
    await history.ensureTable()
    const on = {
      'message.received': (event: { message: { text: string } }) => {
        if (event.message.text === 'boom') throw new TypeError('the handler failed on purpose')
      },
    }
    receiver = await listen(createNodeHandler({ secret: SECRET, on, history, log: false }))
  })

  afterAll(async () => {
    await receiver?.close()
    await history?.close().catch(() => undefined)
    await pool?.end().catch(() => undefined)
    await database?.stop()
  })

  /** Sends delivery `id` (every fifth one fails in its handler) and checks its answer and that it did not wait. */
  async function deliver(i: number): Promise<void> {
    const fails = i % 5 === 4
    const signed = await signWebhook({ secret: SECRET, event: { event: 'message.received', message: { id: `msg_${i}`, text: fails ? 'boom' : 'fine' } }, id: `pg-out-${i}` })
    const started = Date.now()
    const res = await fetch(`${receiver.url}/`, { method: 'POST', headers: signed.headers, body: signed.body, signal: AbortSignal.timeout(5000) })
    const body = (await res.json()) as { code?: string }
    // The answer is the handler's alone, and never waits for the history's server.
    expect({ id: i, status: res.status, code: body.code }).toEqual({ id: i, status: fails ? 500 : 200, code: fails ? 'handler_failed' : undefined })
    expect(Date.now() - started).toBeLessThan(1000)
  }

  it('answers every delivery as usual while the server is dead, counts and logs the loss, and records again once it is back', async () => {
    for (let i = 0; i < 10; i++) await deliver(i)
    await history.flush()
    expect(history.stats()).toMatchObject({ failed: 0, recorded: 10 })
    expect(await history.get('pg-out-4')).toMatchObject({ outcome: 'failed', status: 500, code: 'handler_failed', errorName: 'TypeError' })

    // Killed mid-run: deliveries keep arriving while the postmaster and its backends die.
    let next = 10
    const traffic = (async () => {
      for (; next < 40; next++) {
        await deliver(next)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    })()
    await new Promise((resolve) => setTimeout(resolve, 50))
    await database.crash()
    await traffic
    await history.flush()
    const lost = history.stats().failed
    expect(lost).toBeGreaterThan(0)
    expect(lines.some((line) => /PostgresHistory could not write \d+ record\(s\).*Deliveries are answered as usual/.test(line))).toBe(true)
    const { recorded } = history.stats()

    await database.start()
    // Bounded: the pool drops the clients that died with the server and connects anew.
    await expect.poll(() => pool.query('select 1').then(() => true, () => false), { timeout: 10_000 }).toBe(true)
    for (let i = 40; i < 50; i++) await deliver(i)
    await history.flush()
    expect(history.stats()).toMatchObject({ failed: lost, recorded: recorded + 10 })
    expect(await history.get('pg-out-45')).toMatchObject({ outcome: 'processed', status: 200, deliveries: 1 })
    expect(await history.get('pg-out-49')).toMatchObject({ outcome: 'failed', status: 500, code: 'handler_failed' })
  }, 60_000)
})
