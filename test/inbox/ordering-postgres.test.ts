/**
 * Ordering on PostgresInbox against a real Postgres: the same scenarios as the MemoryInbox
 * properties (fewer runs: each is real round trips), with several workers sharing one database,
 * so the order is kept by the engine and not by one process. The multi-process run with kill -9
 * is test/inbox/ordering-processes.test.ts.
 */
import fc from 'fast-check'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { orderViolations } from '../../tools/order/check.mjs'
import { byConversation, createInboxWorker } from 'svc-webhooks'
import { messageBody } from '../../tools/order/run.mjs'
import { runScenario, scenarios } from './support/ordering-run.js'

describeWithPostgres('ordering on PostgresInbox', () => {
  let server: PostgresServer
  let pool: pg.Pool
  let n = 0
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 12 })
  }, 60_000)
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const inbox = new PostgresInbox({ pool, table: `order_${++n}` })
        await inbox.ensureTable()
        const record = await runScenario(inbox, s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 25 },
    )
  }, 240_000)

  it('sweep() deletes the last-order record of a key idle past the retention', async () => {
    const inbox = new PostgresInbox({ pool, table: 'order_sweep', retentionMs: 100 })
    await inbox.ensureTable()
    await inbox.append({ keys: ['a'], endpoint: 'default', id: 'a', timestamp: 1, signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(1, 0), receivedAt: Date.now() })
    const worker = createInboxWorker({ inbox, ordering: byConversation, pollIntervalMs: 5, log: false, on: { 'message.received': async () => undefined } })
    worker.start()
    for (let i = 0; i < 200 && (await inbox.stats()).depth > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    await worker.stop()
    const count = async () => Number((await pool.query('SELECT count(*) AS n FROM order_sweep_order')).rows[0].n)
    expect(await count()).toBe(1)
    await new Promise((resolve) => setTimeout(resolve, 200))
    await inbox.sweep()
    expect(await count()).toBe(0)
  })
})
