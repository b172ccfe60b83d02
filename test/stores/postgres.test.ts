/**
 * PostgresStore against a real Postgres (initdb + pg_ctl into a temp dir): the shared store
 * contract, statements per delivery (counted on the pool), the table option, sweeping expired
 * rows, claims and sweeps racing a takeover of an expired completion, and the receiver's 503
 * while the database is down, and its recovery once it is back.
 */
import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver } from 'svc-webhooks'
import { PostgresStore, createTableSql } from 'svc-webhooks/postgres'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
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

  /** Claims `k` and completes it with a 1 ms retention, then waits until it has expired (not swept). */
  async function expiredCompletion(store: PostgresStore, k: string) {
    expect(await store.claim(k, 'first', 60_000)).toBe('claimed')
    expect(await store.complete(k, 'first', 1)).toBe(true)
    const expired = async () =>
      (await pool.query('SELECT expires_at <= now() AS expired FROM svc_webhooks_deliveries WHERE key = $1', [k])).rows[0]?.expired === true
    expect(await eventually(expired, 40)).toBe(true)
  }

  /** How many backends wait on a lock (the tests of this file run one at a time). */
  async function blockedBackends(): Promise<number> {
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0')
    return rows[0].n
  }

  /**
   * Holds the row lock of `k` on `locker` while `start()` sends statements, until `waiters` backends
   * wait on a lock, then lets them go: every statement's snapshot predates the others' changes.
   */
  async function gated<T>(locker: pg.PoolClient, k: string, waiters: number, start: () => Promise<T>): Promise<T> {
    await locker.query('BEGIN')
    try {
      await locker.query('SELECT 1 FROM svc_webhooks_deliveries WHERE key = $1 FOR UPDATE', [k])
      const running = start()
      expect(await eventually(async () => (await blockedBackends()) === waiters)).toBe(true)
      await locker.query('COMMIT')
      return await running
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined)
    }
  }

  it('two copies claim an expired, unswept completion at once: one claims, the other is in flight, never completed', async () => {
    // One copy takes the row over; the other waits on the row lock and must then answer from the
    // row as it is now (claimed: in flight), not from the expired completion its statement
    // snapshot still holds, or the receiver answers 200 duplicate for a delivery nobody
    // processed if the taker's handler then fails. The row lock is held until both claims wait
    // on it, so both snapshots predate the takeover in every round (left to chance, only some
    // rounds interleave like that).
    const racers = new pg.Pool({ connectionString: server.url, max: 4 })
    racers.on('error', () => {})
    const locker = await racers.connect()
    try {
      const store = new PostgresStore({ pool: racers, timeoutMs: 10_000 })
      const ROUNDS = 50
      const tally: Record<string, number> = {}
      for (let round = 0; round < ROUNDS; round++) {
        const k = `race:${randomUUID()}`
        await expiredCompletion(store, k)
        const pair = await gated(locker, k, 2, () => Promise.all([store.claim(k, 'x', 60_000), store.claim(k, 'y', 60_000)]))
        const outcome = pair.sort().join('+')
        tally[outcome] = (tally[outcome] ?? 0) + 1
      }
      console.info(`[PostgresStore] ${ROUNDS} rounds of two copies claiming an expired completion: ${JSON.stringify(tally)}`)
      expect(tally).toEqual({ 'claimed+in_flight': ROUNDS })
    } finally {
      locker.release()
      await racers.end()
    }
  })

  it('sweep() waiting on an expired completion that a claim takes over leaves the new claim alone', async () => {
    const racers = new pg.Pool({ connectionString: server.url, max: 4 })
    racers.on('error', () => {})
    const locker = await racers.connect()
    try {
      const store = new PostgresStore({ pool: racers, timeoutMs: 10_000 })
      for (let round = 0; round < 10; round++) {
        const k = `sweep-race:${randomUUID()}`
        await expiredCompletion(store, k)
        // The claim queues for the row lock first, the sweep behind it.
        const [claimed] = await gated(locker, k, 2, async () => {
          const claim = store.claim(k, 'taker', 60_000)
          expect(await eventually(async () => (await blockedBackends()) === 1)).toBe(true)
          return Promise.all([claim, store.sweep()])
        })
        expect(claimed).toBe('claimed')
        expect((await pool.query('SELECT owner FROM svc_webhooks_deliveries WHERE key = $1', [k])).rows).toEqual([{ owner: 'taker' }])
        expect(await store.claim(k, 'another copy', 60_000)).toBe('in_flight')
      }
    } finally {
      locker.release()
      await racers.end()
    }
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

describe('PostgresStore options (no server)', () => {
  it('refuses a pg.Client (`client`), which never reconnects after a database restart, saying to pass a pg.Pool', () => {
    const client = new pg.Client({ connectionString: 'postgres://127.0.0.1:1/none' })
    expect(() => new PostgresStore({ client } as never)).toThrow(TypeError)
    expect(() => new PostgresStore({ client } as never)).toThrow(/not `client`.*pg\.Client does not reconnect.*pg\.Pool/)
    // With a pool beside it the client is refused all the same: it would be a silent choice otherwise.
    const pool = new pg.Pool({ connectionString: 'postgres://127.0.0.1:1/none' })
    expect(() => new PostgresStore({ pool, client } as never)).toThrow(TypeError)
    expect(new PostgresStore({ pool }).table).toBe('svc_webhooks_deliveries')
  })
})
