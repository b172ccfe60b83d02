/**
 * Tables that look after themselves, against a real Postgres: PostgresStore and PostgresInbox
 * delete their expired rows on their own timer, with no `sweep()` of the user's; one process
 * maintains a table at a time (a round that meets the advisory lock held elsewhere deletes
 * nothing); a round deletes in bounded batches (at most 10 of `maintenanceBatch`) and never a row
 * still live; `sweep()` still works; bad settings are refused at construction.
 */
import { randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { PostgresInbox, PostgresStore, createInboxTableSql, createTableSql } from 'svc-webhooks/postgres'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { textDelivery } from '../inbox/worker-faults.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithPostgres('Postgres tables that look after themselves', () => {
  let server: PostgresServer
  let pool: pg.Pool
  const closing: Array<{ close(): void }> = []
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 10 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    for (const c of closing) c.close()
    await pool?.end()
    await server?.stop()
  })

  /** A fresh store table with `expired` rows past their expiry and `live` ones not. */
  async function storeTable(expired: number, live: number): Promise<string> {
    const table = `maint_${randomUUID().replace(/-/g, '').slice(0, 12)}`
    await pool.query(createTableSql(table))
    await pool.query(`INSERT INTO "${table}" (key, owner, completed, expires_at) SELECT 'old:' || g, '', true, now() - interval '1 minute' FROM generate_series(1, $1::int) g`, [expired])
    await pool.query(`INSERT INTO "${table}" (key, owner, completed, expires_at) SELECT 'live:' || g, '', true, now() + interval '1 hour' FROM generate_series(1, $1::int) g`, [live])
    return table
  }
  const count = async (table: string, like: string) => Number((await pool.query(`SELECT count(*)::int AS n FROM "${table}" WHERE key LIKE $1`, [like])).rows[0].n)

  it('PostgresStore deletes its expired rows on its own timer, no sweep() of yours; live rows stay', async () => {
    const table = await storeTable(1500, 200)
    const store = new PostgresStore({ pool, table, maintenanceIntervalMs: 100, maintenanceBatch: 500 })
    closing.push(store)
    for (let i = 0; i < 60 && (await count(table, 'old:%')) > 0; i++) await sleep(50)
    expect(await count(table, 'old:%')).toBe(0)
    expect(await count(table, 'live:%')).toBe(200)
    // A claim, a completion and a duplicate still behave with the maintenance running beside them.
    expect(await store.claim('fresh', 'owner', 60_000)).toBe('claimed')
    expect(await store.complete('fresh', 'owner', 60_000)).toBe(true)
    expect(await store.claim('fresh', 'other', 60_000)).toBe('completed')
    store.close()
  })

  it('bounded: one round deletes at most 10 batches of maintenanceBatch; the rest goes in the next', async () => {
    const table = await storeTable(1500, 0)
    const store = new PostgresStore({ pool, table, maintenanceIntervalMs: false, maintenanceBatch: 100 })
    expect(await store.maintain()).toEqual({ locked: true, deleted: 1000 })
    expect(await store.maintain()).toEqual({ locked: true, deleted: 500 })
    expect(await store.maintain()).toEqual({ locked: true, deleted: 0 })
  })

  it('one maintainer at a time: while another session holds the table lock, a round deletes nothing; then it does', async () => {
    const table = await storeTable(300, 10)
    const stores = [0, 1].map(() => new PostgresStore({ pool, table, maintenanceIntervalMs: false }))
    const holder = await pool.connect()
    try {
      // The lock every instance on this table asks for, held by "another process".
      await holder.query(`SELECT pg_advisory_lock(hashtext($1))`, [`svc-webhooks maintenance "${table}"`])
      for (const store of stores) expect(await store.maintain()).toEqual({ locked: false, deleted: 0 })
      expect(await count(table, 'old:%')).toBe(300)
      await holder.query(`SELECT pg_advisory_unlock(hashtext($1))`, [`svc-webhooks maintenance "${table}"`])
    } finally {
      holder.release()
    }
    const rounds = await Promise.all(stores.map((store) => store.maintain()))
    expect(rounds.reduce((sum, r) => sum + r.deleted, 0)).toBe(300)
    expect(await count(table, 'live:%')).toBe(10)
  })

  it('sweep() stays: it deletes expired rows on demand, with maintenance off', async () => {
    const table = await storeTable(50, 5)
    const store = new PostgresStore({ pool, table, maintenanceIntervalMs: false })
    expect(await store.sweep()).toBe(50)
    expect(await count(table, '%')).toBe(5)
  })

  it('PostgresInbox deletes processed keys past their retention on its own; a resend after that is accepted again', async () => {
    const table = `inbox_${randomUUID().replace(/-/g, '').slice(0, 12)}`
    await pool.query(createInboxTableSql(table))
    const inbox = new PostgresInbox({ pool, table, retentionMs: 200, maintenanceIntervalMs: 100 })
    closing.push(inbox)
    const done = textDelivery('processed')
    const waiting = textDelivery('still waiting')
    expect(await inbox.append(done)).toBe('accepted')
    const [entry] = await inbox.take(1, 60_000)
    expect(await inbox.complete(entry!)).toBe(true)
    expect(await inbox.append(waiting)).toBe('accepted')
    expect(await inbox.append(done)).toBe('duplicate')
    const keys = async () => (await pool.query(`SELECT key FROM "${table}_keys" ORDER BY key`)).rows.map((r) => r.key as string)
    for (let i = 0; i < 60 && (await keys()).includes(done.keys[0]!); i++) await sleep(50)
    // The processed key is gone; the key of the delivery still waiting is held.
    expect(await keys()).toEqual([waiting.keys[0]])
    expect(await inbox.stats()).toMatchObject({ depth: 1 })
    // Past the retention window a resend is a new delivery, as before maintenance existed.
    expect(await inbox.append(done)).toBe('accepted')
    inbox.close()
  })

  it('refuses bad maintenance settings at construction', () => {
    expect(() => new PostgresStore({ pool, maintenanceIntervalMs: 0 })).toThrow(/maintenanceIntervalMs/)
    expect(() => new PostgresStore({ pool, maintenanceIntervalMs: true as never })).toThrow(/maintenanceIntervalMs/)
    expect(() => new PostgresInbox({ pool, maintenanceBatch: 0 })).toThrow(/maintenanceBatch/)
    expect(() => new PostgresInbox({ pool, maintenanceBatch: 1.5 })).toThrow(/maintenanceBatch/)
  })
})
