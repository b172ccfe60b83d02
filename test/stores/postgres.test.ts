/**
 * PostgresStore against a real Postgres (initdb + pg_ctl into a temp dir): the shared store
 * contract, statements per delivery (counted on the pool), the table option, sweeping expired
 * rows, and the receiver's 503 while the database is down, and its recovery once it is back.
 */
import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver } from 'svc-webhooks'
import { PostgresStore, createTableSql } from 'svc-webhooks/postgres'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres, startPostgresServer, type PostgresServer } from '../support/postgres-server.js'
import { describeStoreContract, eventually } from './contract.js'

const SECRET = 'svc_whsec_postgres_tests'

async function deliver(receiver: ReturnType<typeof createWebhookReceiver>, id = randomUUID()) {
  const signed = await signWebhook({ secret: SECRET, event: sampleEvent('message.received'), id })
  return receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
}

describeWithPostgres('PostgresStore', () => {
  let server: PostgresServer
  let pool: pg.Pool
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 20 })
    pool.on('error', () => {})
    await new PostgresStore({ pool }).ensureTable()
    await pool.query(createTableSql('svc_webhooks_other'))
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  describe('store contract: PostgresStore', () => {
    describeStoreContract(async () => ({
      store: new PostgresStore({ pool }),
      isolated: () => new PostgresStore({ pool, table: 'svc_webhooks_other' }),
      close: async () => {},
    }))
  })

  it('costs 2 statements per fresh delivery and 1 per duplicate', async () => {
    let statements = 0
    const counting = { query: (text: string, values?: unknown[]) => (statements++, pool.query(text, values)) }
    const receiver = createWebhookReceiver({
      secret: SECRET,
      store: new PostgresStore({ pool: counting }),
      on: { 'message.received': () => {} },
    })
    const ids = Array.from({ length: 20 }, () => randomUUID())
    for (const id of ids) expect((await deliver(receiver, id)).status).toBe(200)
    const fresh = statements
    statements = 0
    for (const id of ids) expect((await deliver(receiver, id)).status).toBe(200)
    expect(fresh).toBe(2 * ids.length)
    expect(statements).toBe(ids.length)
    console.info(`[PostgresStore] round trips per fresh delivery: ${fresh / ids.length}, per duplicate: ${statements / ids.length}`)
  })

  it('sweep() deletes expired rows only', async () => {
    const store = new PostgresStore({ pool })
    const [gone, kept] = [randomUUID(), randomUUID()]
    await store.claim(gone, 'a', 60_000)
    await store.complete(gone, 'a', 1)
    await store.claim(kept, 'a', 60_000)
    const rowsOf = async () =>
      (await pool.query('SELECT key FROM svc_webhooks_deliveries WHERE key = ANY($1)', [[gone, kept]])).rows.map((r: { key: string }) => r.key)
    expect(await eventually(async () => (await store.sweep(), (await rowsOf()).length === 1))).toBe(true)
    expect(await rowsOf()).toEqual([kept])
  })

  it('refuses a table name that is not a plain identifier, and a missing pool', () => {
    expect(() => new PostgresStore({ pool, table: 'x; DROP TABLE y' })).toThrow(TypeError)
    expect(() => createTableSql('a.b.c')).toThrow(TypeError)
    expect(() => new PostgresStore({} as never)).toThrow(TypeError)
  })

  it('database restarted: 503 while it is down, handler not run; afterwards the same pool and receiver succeed', async () => {
    const runs: string[] = []
    const receiver = createWebhookReceiver({
      secret: SECRET,
      store: new PostgresStore({ pool, timeoutMs: 300 }),
      on: { 'message.received': (_e, d) => void runs.push(d.id) },
    })
    const id = randomUUID()
    await server.kill()
    let down
    try {
      down = await deliver(receiver, id)
    } finally {
      await server.start()
    }
    expect(down.status).toBe(503)
    expect(down.headers['retry-after']).toBe('5')
    expect(runs).toEqual([])
    expect(await eventually(async () => (await deliver(receiver, id)).status === 200)).toBe(true)
    expect(runs).toEqual([id])
  })

  it('database unreachable: the receiver answers 503 with Retry-After and the handler does not run', async () => {
    const runs: string[] = []
    const nowhere = new pg.Pool({ host: '127.0.0.1', port: 1, user: 'postgres', connectionTimeoutMillis: 200 })
    nowhere.on('error', () => {})
    try {
      const receiver = createWebhookReceiver({
        secret: SECRET,
        store: new PostgresStore({ pool: nowhere, timeoutMs: 300 }),
        on: { 'message.received': (_e, d) => void runs.push(d.id) },
      })
      const answer = await deliver(receiver)
      expect(answer.status).toBe(503)
      expect(answer.headers['retry-after']).toBe('5')
      expect(runs).toEqual([])
    } finally {
      await nowhere.end()
    }
  })
})
