/**
 * `ensureTable()` called by several processes at the same moment (a deployment whose replicas all
 * start at once) against a real Postgres: eight calls at once on each of ten fresh tables, for
 * PostgresStore, PostgresInbox and PostgresHistory, every call resolves, and the table works.
 * Without the DDL lock (src/clients/postgres.ts, `serializedDdl`), two `CREATE ... IF NOT EXISTS`
 * racing fail the loser with a unique violation on pg_type, 42P07 or 42710.
 */
import { expect, it } from 'vitest'
import { PostgresHistory, PostgresInbox, PostgresStore } from 'svc-webhooks/postgres'
import { describeWithPostgres } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { inboxDelivery } from '../inbox/contract.js'

describeWithPostgres('ensureTable() from many processes at once', () => {
  // As many connections as calls at once: each call on a session of its own, as from processes.
  const postgres = usePostgresServer({ max: 8 })

  /** Eight `ensureTable()` at once on each of ten fresh tables: the reasons of those that failed. */
  async function race(make: (table: string) => { ensureTable(): Promise<void>; close?(): void }, kind: string): Promise<string[]> {
    const failures: string[] = []
    for (let t = 0; t < 10; t++) {
      const made = Array.from({ length: 8 }, () => make(`ddl_${kind}_${t}`))
      const results = await Promise.allSettled(made.map((one) => one.ensureTable()))
      for (const result of results) if (result.status === 'rejected') failures.push(String((result.reason as Error).message).slice(0, 120))
      for (const one of made) one.close?.()
    }
    return failures
  }

  it('PostgresStore: every call resolves, and the store claims', async () => {
    expect(await race((table) => new PostgresStore({ pool: postgres.pool, table, maintenanceIntervalMs: false }), 'store')).toEqual([])
    const store = new PostgresStore({ pool: postgres.pool, table: 'ddl_store_0', maintenanceIntervalMs: false })
    expect(await store.claim('ep:1', 'owner', 60_000)).toBe('claimed')
    store.close()
  })

  it('PostgresInbox: every call resolves, and the inbox appends', async () => {
    expect(await race((table) => new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false }), 'inbox')).toEqual([])
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'ddl_inbox_0', maintenanceIntervalMs: false })
    expect(await inbox.append(inboxDelivery())).toBe('accepted')
    inbox.close()
  })

  it('PostgresHistory: every call resolves', async () => {
    expect(await race((table) => new PostgresHistory({ pool: postgres.pool, table }), 'history')).toEqual([])
    expect(await new PostgresHistory({ pool: postgres.pool, table: 'ddl_history_0' }).list()).toMatchObject({ entries: [] })
  })
})
