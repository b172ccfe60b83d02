/**
 * PostgresInbox's and PostgresStore's statements go prepared (named, once per connection;
 * src/clients/postgres.ts), and go on unnamed when the server says a name is not what the client
 * believes: against a real Postgres, each statement prepared once on the pool's one connection;
 * `DEALLOCATE ALL` under a running inbox or store (what a pooler or a restarted session does) and
 * every operation still answering, from then on unnamed; an object that is not a `pg` Pool given
 * text and values only; and a real PgBouncer in transaction mode (two server connections behind
 * eight client ones): 300 deliveries appended, taken and completed, each exactly once.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { PostgresInbox, PostgresStore } from 'svc-webhooks/postgres'
import { describeWithPostgres, describeWithService } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { pgbouncerSkipReason, startPgbouncer } from '../../tools/pgbouncer.mjs'
import { inboxDelivery } from './contract.js'

/** The library's statements prepared on the connection `db` runs on. */
async function preparedHere(db: pg.Pool | pg.PoolClient): Promise<string[]> {
  const { rows } = await db.query(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'svc\\_%' ORDER BY name`)
  return rows.map((row: { name: string }) => row.name)
}

/** Appends, takes and completes `count` deliveries; the ids completed, in the order done. */
async function roundTrip(inbox: PostgresInbox, count: number): Promise<string[]> {
  const deliveries = Array.from({ length: count }, () => inboxDelivery())
  for (const delivery of deliveries) expect(await inbox.append(delivery)).toBe('accepted')
  const done: string[] = []
  for (let takes = 0; takes < count * 2 && done.length < count; takes++) {
    for (const entry of await inbox.take(5, 30_000)) {
      expect(await inbox.complete(entry)).toBe(true)
      done.push(entry.id)
    }
  }
  return done
}

describeWithPostgres('PostgresInbox prepared statements', () => {
  // One connection: what the inbox prepared is what this test's queries see.
  const postgres = usePostgresServer({ max: 1 })

  it('prepares each statement once on a connection, and reuses it', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'prepared_once' })
    await inbox.ensureTable()
    expect(await roundTrip(inbox, 3)).toHaveLength(3)
    const first = await preparedHere(postgres.pool)
    // append, take and complete at least, each under one name.
    expect(first.length).toBeGreaterThanOrEqual(3)
    expect(await roundTrip(inbox, 3)).toHaveLength(3)
    expect(await preparedHere(postgres.pool)).toEqual(first)
  })

  it('goes on unnamed once the server lost what the client prepared', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'prepared_lost' })
    await inbox.ensureTable()
    expect(await roundTrip(inbox, 2)).toHaveLength(2)
    expect((await preparedHere(postgres.pool)).length).toBeGreaterThan(0)
    // The client still believes them prepared; the server holds none.
    await postgres.pool.query('DEALLOCATE ALL')
    const done = await roundTrip(inbox, 4)
    expect(done).toHaveLength(4)
    expect(new Set(done).size).toBe(4)
    expect((await inbox.stats()).depth).toBe(0)
    // Nothing was prepared again: the inbox's statements now go unnamed.
    expect(await preparedHere(postgres.pool)).toEqual([])
  })

  it('PostgresStore claims prepared, and answers on unnamed once the server lost them', async () => {
    const store = new PostgresStore({ pool: postgres.pool, table: 'prepared_store', maintenanceIntervalMs: false })
    await store.ensureTable()
    await postgres.pool.query('DEALLOCATE ALL')
    expect(await store.claim('ep:a', 'owner-a', 60_000)).toBe('claimed')
    expect(await store.complete('ep:a', 'owner-a', 60_000)).toBe(true)
    expect((await preparedHere(postgres.pool)).length).toBe(2)
    await postgres.pool.query('DEALLOCATE ALL')
    expect(await store.claim('ep:a', 'owner-b', 60_000)).toBe('completed')
    expect(await store.claim('ep:b', 'owner-b', 60_000)).toBe('claimed')
    expect(await store.complete('ep:b', 'owner-b', 60_000)).toBe(true)
    expect(await preparedHere(postgres.pool)).toEqual([])
    store.close()
  })

  it('an object that is not a pg Pool gets text and values, as its query(text, values) says', async () => {
    const seen: unknown[] = []
    const db = { query: (text: unknown, values?: unknown[]) => (seen.push(text), postgres.pool.query(text as string, values)) }
    const store = new PostgresStore({ pool: db, table: 'prepared_plain', maintenanceIntervalMs: false })
    await store.ensureTable()
    expect(await store.claim('ep:c', 'owner-c', 60_000)).toBe('claimed')
    expect(await store.complete('ep:c', 'owner-c', 60_000)).toBe(true)
    expect(seen.length).toBe(3)
    expect(seen.every((text) => typeof text === 'string')).toBe(true)
    store.close()
  })
})

describeWithPostgres('PostgresInbox through PgBouncer', () => {
  describeWithService('PgBouncer in transaction mode', 'PgBouncer', pgbouncerSkipReason(), () => {
    const postgres = usePostgresServer({ max: 1 })
    let bouncer: Awaited<ReturnType<typeof startPgbouncer>>
    let pool: pg.Pool
    beforeAll(async () => {
      bouncer = await startPgbouncer({ postgresPort: postgres.server.port, poolSize: 2 })
      pool = new pg.Pool({ connectionString: bouncer.url, max: 8 })
      pool.on('error', () => {})
    }, 30_000)
    afterAll(async () => {
      await pool?.end()
      await bouncer?.stop()
    })

    it('every delivery appended, taken and completed exactly once', async () => {
      const inbox = new PostgresInbox({ pool, table: 'bounced' })
      await inbox.ensureTable()
      const deliveries = Array.from({ length: 300 }, () => inboxDelivery())
      // Eight clients at once over two server connections: each transaction lands on either.
      for (let i = 0; i < deliveries.length; i += 30) {
        const answers = await Promise.all(deliveries.slice(i, i + 30).map((delivery) => inbox.append(delivery)))
        expect(answers.every((answer) => answer === 'accepted')).toBe(true)
      }
      const done: string[] = []
      const worker = async () => {
        for (let takes = 0; takes < 400 && done.length < deliveries.length; takes++) {
          const entries = await inbox.take(10, 30_000)
          const acked = await Promise.all(entries.map((entry) => inbox.complete(entry)))
          expect(acked.every(Boolean)).toBe(true)
          done.push(...entries.map((entry) => entry.id))
        }
      }
      await Promise.all([worker(), worker(), worker(), worker()])
      expect(done).toHaveLength(deliveries.length)
      expect(new Set(done)).toEqual(new Set(deliveries.map((delivery) => delivery.id)))
      expect((await inbox.stats()).depth).toBe(0)
    }, 60_000)
  })
})
