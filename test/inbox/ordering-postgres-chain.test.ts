/**
 * PostgresInbox's `completeNext` against a real Postgres: completing a head leases the next head
 * of its key to the caller in the same round trip, only when a take would lease it now (due, not
 * a suspect, nothing unplaced that could come first, not paused); a repeat after a lost reply
 * brings back the same head; `chain: false` only completes and wakes the key for the takes. An
 * ordered worker goes through a conversation by these completions, not a take per message, and
 * gives back a head it was handed after stop(). A table whose statements lack the function (its
 * migrations not run again) still completes. Postgres killed right after a chained message ran:
 * its completion is retried across the restart and brings the next message, each run once.
 */
import pg from 'pg'
import { expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { byConversation, createInboxWorker, type OrderedEntry, type OrderedTake } from 'svc-webhooks'
import { describeWithPostgres } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { messageBody } from '../../tools/order/run.mjs'
import { delivery } from './support/ordering-run.js'
import { chainThrough, raceWithTakes, restartMidChain, workerChainsSixteen } from './support/chain-cases.js'

const filed = { placeLeaseMs: 5_000, poke: [], filed: { strict: true } }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithPostgres('PostgresInbox.completeNext: a completion leases the next head of its key', () => {
  const postgres = usePostgresServer({ max: 8 })

  /** An inbox on `table` filing by conversation, with messages 0..count-1 of conversation 1 appended, newest first. */
  async function conversation(table: string, count: number): Promise<PostgresInbox> {
    const inbox = new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false, ordering: byConversation })
    await inbox.ensureTable()
    for (let index = count - 1; index >= 0; index--) await inbox.append(delivery(`d${index}-1`, messageBody(1, index), Date.now()))
    return inbox
  }
  /** The one head an ordered take hands out (placing what was filed first). */
  async function head(inbox: PostgresInbox): Promise<OrderedEntry> {
    let taken: OrderedTake = await inbox.takeOrdered(5, 60_000, filed)
    for (let i = 0; i < 5 && taken.run.length === 0; i++) taken = await inbox.takeOrdered(5, 60_000, filed)
    expect(taken.run).toHaveLength(1)
    return taken.run[0]!
  }
  const leased = async (table: string) => (await postgres.pool.query(`SELECT id FROM ${table} WHERE lease IS NOT NULL AND visible_at > now() ORDER BY id`)).rows.map((row) => row.id)

  it('hands each next head to the completion of the one before, in order, until the key is empty', async () => {
    const inbox = await conversation('chain_order', 4)
    await chainThrough(inbox, await head(inbox), 4, async (entry) => expect(await leased('chain_order')).toEqual([entry.id]))
  })

  it('a completion and four takes at once, on separate connections: the next head goes to one of them, 10 times', async () => {
    for (let round = 0; round < 10; round++) {
      const inbox = await conversation(`chain_race_${round}`, 3)
      await raceWithTakes(inbox, await head(inbox), () => inbox.takeOrdered(5, 60_000, filed))
    }
  })

  it('a repeat of the same completion (its reply lost) brings back the same next head, leased once', async () => {
    const inbox = await conversation('chain_repeat', 3)
    const first = await head(inbox)
    const once = await inbox.completeNext(first, 60_000, true)
    const again = await inbox.completeNext(first, 60_000, true)
    expect(once.next?.id).toBe('d1-1')
    expect(again).toEqual(once)
    expect(await leased('chain_repeat')).toEqual(['d1-1'])
    // A lease that is not the one completed is not a repeat: nothing done, nothing handed out.
    expect(await inbox.completeNext({ ...first, lease: 'another' }, 60_000, true)).toEqual({ done: false })
  })

  it('no next head while the inbox is paused, and the key is left for the takes', async () => {
    const inbox = await conversation('chain_paused', 2)
    const first = await head(inbox)
    await inbox.setPause(true, 'test')
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    expect(await leased('chain_paused')).toEqual([])
    await inbox.setPause(false)
    expect((await head(inbox)).id).toBe('d1-1')
  })

  it('no next head while a delivery of the key waits unplaced: it may come first', async () => {
    const inbox = await conversation('chain_unplaced', 3)
    const first = await head(inbox)
    // Filed but not placed yet (no take since): created before d1 and d2, after d0.
    await inbox.append(delivery('d0.5-1', messageBody(1, 0, ''), Date.now()))
    await postgres.pool.query(`UPDATE chain_unplaced SET filed_at = (SELECT order_at FROM chain_unplaced WHERE id = 'd0-1') || 'x' WHERE id = 'd0.5-1'`)
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    expect((await head(inbox)).id).toBe('d0.5-1')
  })

  it('no next head that is a suspect (handed out before without a result): it runs alone, through a take', async () => {
    const inbox = await conversation('chain_suspect', 2)
    const first = await head(inbox)
    await postgres.pool.query(`UPDATE chain_suspect SET takes = 1 WHERE id = 'd1-1'`)
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    const second = await head(inbox)
    expect(second.id).toBe('d1-1')
    expect(second.takes).toBe(2)
  })

  it('`chain: false` completes only, and the key is ready for the next take at once', async () => {
    const inbox = await conversation('chain_off', 2)
    const first = await head(inbox)
    expect(await inbox.completeNext(first, 60_000, false)).toEqual({ done: true })
    expect(await leased('chain_off')).toEqual([])
    expect((await head(inbox)).id).toBe('d1-1')
  })

  it('an ordered worker goes through a conversation by its completions, 16 in a row, then its key goes back to the takes', async () => {
    await workerChainsSixteen(await conversation('chain_worker', 40))
  })

  it('a head handed to a worker after stop() was called goes back at once, not after its lease', async () => {
    const inbox = await conversation('chain_stop', 3)
    const ran: string[] = []
    const worker = createInboxWorker({ inbox, pollIntervalMs: 5, visibilityTimeoutMs: 60_000, log: false, on: { 'message.received': async (_event, d) => void ran.push(d.id) } })
    // stop() is called while the first completion is on its way back with the next head.
    let stopping: Promise<void> | undefined
    let handedOut: string | undefined
    const completeNext = inbox.completeNext.bind(inbox)
    inbox.completeNext = async (...args) => {
      const done = await completeNext(...args)
      handedOut ??= done.next?.id
      stopping ??= worker.stop()
      return done
    }
    worker.start()
    for (let i = 0; i < 500 && stopping === undefined; i++) await sleep(10)
    await stopping
    expect(handedOut).toBe('d1-1')
    expect(ran).toEqual(['d0-1'])
    expect(await leased('chain_stop')).toEqual([])
    expect((await head(inbox)).id).toBe('d1-1')
  })

  it('a table whose statements lack the function (migrations not run again) still completes', async () => {
    const inbox = await conversation('chain_old', 2)
    const first = await head(inbox)
    await postgres.pool.query('DROP FUNCTION chain_old_complete_next')
    expect(await inbox.completeNext(first, 60_000, true)).toEqual({ done: true })
    expect((await head(inbox)).id).toBe('d1-1')
  })

  // Last in the file: the shared server is killed and started again.
  it('Postgres killed right after a chained message ran: its completion is retried across the restart, and the conversation runs on in order, each message once', { timeout: 60_000 }, async () => {
    const pool = new pg.Pool({ connectionString: postgres.server.url, max: 4 })
    // The idle connections of both pools die with the server: pg reports each here and drops it.
    pool.on('error', () => {})
    postgres.pool.on('error', () => {})
    try {
      const inbox = new PostgresInbox({ pool, table: 'chain_restart', maintenanceIntervalMs: false, ordering: byConversation })
      await inbox.ensureTable()
      for (let index = 7; index >= 0; index--) await inbox.append(delivery(`d${index}-1`, messageBody(1, index), Date.now()))
      await restartMidChain(inbox, postgres.server)
    } finally {
      await pool.end()
    }
  })
})
