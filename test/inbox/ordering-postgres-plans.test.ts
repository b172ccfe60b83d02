/**
 * PostgresInbox's ordered statements read a handful of rows per delivery whatever the table's
 * statistics say. Autovacuum analyzes the deliveries table when a tenth of it changed: with the
 * workers paused during a deployment, that is a backlog in which every delivery is still unplaced.
 * Planned from those statistics, a probe for "anything unplaced?" that scanned the queued rows
 * in any index order expected a match at once, and read the whole placed backlog on every
 * completion and every take (the ordered workers at 59 % of the unordered ones in
 * `bench:order`). So did the take's probe for a placing in progress when the workers place. The
 * probes now walk the unplaced rows' own index in its order.
 *
 * The key table is the other way round: one row per conversation with work, small, and analyzed
 * small, so the planner preferred to read it whole (the completion trigger's update by key, a
 * hash of every key row for each hand-out) over its primary key. The ordered functions now run
 * with sequential scans off.
 */
import { expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { byConversation, type OrderedEntry } from 'svc-webhooks'
import { describeWithPostgres } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { messageBody } from '../../tools/order/run.mjs'
import { delivery } from './support/ordering-run.js'

const filed = { placeLeaseMs: 5_000, poke: [], filed: { strict: true } }
const CONVERSATIONS = 40
const MESSAGES = 50

describeWithPostgres('PostgresInbox ordering: statements planned from the statistics of a backlog', () => {
  // One connection: its backend's table counters are the ones read.
  const postgres = usePostgresServer({ max: 1 })

  /** A counter of `table` in pg_stat_user_tables (an expression of its columns), this backend's counts flushed first. */
  async function tableCounter(table: string, counter: string): Promise<number> {
    await postgres.pool.query('SELECT pg_stat_force_next_flush()')
    const { rows } = await postgres.pool.query(`SELECT ${counter} AS n FROM pg_stat_user_tables WHERE relname = $1`, [table])
    return Number(rows[0].n)
  }

  /** Rows of `table` read so far by sequential and index scans. */
  const rowsRead = (table: string) => tableCounter(table, 'COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)')

  it('a chained completion and a take read a few rows each, not the backlog, after ANALYZE saw every delivery unplaced', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'plans_backlog', maintenanceIntervalMs: false, ordering: byConversation })
    await inbox.ensureTable()
    for (let m = 0; m < MESSAGES; m++) {
      for (let c = 0; c < CONVERSATIONS; c++) await inbox.append(delivery(`c${c}-m${m}`, messageBody(c, m), Date.now()))
    }
    // The statistics autovacuum takes of a paused backlog: every row queued and unplaced.
    await postgres.pool.query('ANALYZE plans_backlog')
    let heads: OrderedEntry[] = []
    // Bounded: each take places up to a batch of the 2,000 filed deliveries.
    for (let i = 0; i < 100 && heads.length === 0; i++) heads = (await inbox.takeOrdered(CONVERSATIONS, 60_000, filed)).run
    expect(heads.length).toBeGreaterThan(0)

    const before = await rowsRead('plans_backlog')
    let completions = 0
    for (const head of heads) {
      let entry: OrderedEntry | undefined = head
      // Bounded: a conversation has MESSAGES messages.
      for (let m = 0; m < MESSAGES && entry !== undefined; m++) {
        entry = (await inbox.completeNext(entry, 60_000, true)).next
        completions++
      }
    }
    const takes = 20
    for (let i = 0; i < takes; i++) await inbox.takeOrdered(0, 60_000, filed)
    const rows = (await rowsRead('plans_backlog')) - before
    // What a completion reads: its row, the next head's, and the versions its key's index entries
    // still point to (about 22 rows a call here); a probe of the unplaced rows' index finds none.
    // Planned to scan the queued rows instead, about 990 a call: half the 2,000-row backlog.
    expect(completions).toBeGreaterThan(100)
    expect(rows / (completions + takes)).toBeLessThan(100)
    inbox.close()
  })

  it('a completion and a take read the small key table through its key, never whole', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'plans_keys', maintenanceIntervalMs: false, ordering: byConversation })
    await inbox.ensureTable()
    for (let m = 0; m < 10; m++) {
      for (let c = 0; c < CONVERSATIONS; c++) await inbox.append(delivery(`c${c}-m${m}`, messageBody(c, m), Date.now()))
    }
    // Placed (takes of no head until nothing is left to place), then analyzed: a key table of 40
    // rows, as a deployment with 40 busy conversations has.
    for (let i = 0; i < 100; i++) {
      const taken = await inbox.takeOrdered(0, 60_000, filed)
      if (taken.place.length === 0 && !taken.busy) break
    }
    await postgres.pool.query('ANALYZE')
    const scans = () => tableCounter('plans_keys_order', 'COALESCE(seq_scan, 0)')
    const before = await scans()
    let completions = 0
    // Bounded: 400 deliveries, each taken or chained once.
    for (let i = 0; i < 100; i++) {
      const taken = (await inbox.takeOrdered(4, 60_000, filed)).run
      if (taken.length === 0) break
      for (const head of taken) {
        let entry: OrderedEntry | undefined = head
        for (let m = 0; m < 10 && entry !== undefined; m++) {
          entry = (await inbox.completeNext(entry, 60_000, true)).next
          completions++
        }
      }
    }
    expect(completions).toBe(CONVERSATIONS * 10)
    // Planned from its statistics, each completion scanned the key table twice (about 800 here).
    expect((await scans()) - before).toBe(0)
    inbox.close()
  })

  it('with the workers placing, a take that finds nothing to place reads a few rows, not the placed backlog', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'plans_placing', maintenanceIntervalMs: false })
    await inbox.ensureTable()
    for (let m = 0; m < MESSAGES; m++) {
      for (let c = 0; c < CONVERSATIONS; c++) await inbox.append(delivery(`c${c}-m${m}`, messageBody(c, m), Date.now()))
    }
    await postgres.pool.query('ANALYZE plans_placing')
    const placing = { placeLeaseMs: 5_000, poke: [] }
    // Bounded: each take hands out up to a batch of the 2,000 deliveries to place.
    for (let i = 0; i < 100; i++) {
      const { place } = await inbox.takeOrdered(0, 60_000, placing)
      if (place.length === 0) break
      // Ids are `c<conversation>-m<message>`: the key and the order a worker's key function gives.
      const placements = place.map((entry) => {
        const [conversation, index] = entry.id.split('-')
        return { entry, key: conversation!, order: index!.slice(1).padStart(6, '0'), strict: true }
      })
      expect(await inbox.place(placements)).not.toContain(false)
    }
    expect((await postgres.pool.query("SELECT count(*)::int AS n FROM plans_placing WHERE order_key IS NULL AND state = 'queued'")).rows[0].n).toBe(0)

    const before = await rowsRead('plans_placing')
    const takes = 40
    for (let i = 0; i < takes; i++) await inbox.takeOrdered(0, 60_000, placing)
    // A take with nothing to place probes for a placing in progress in the unplaced rows' index,
    // empty: no row read here. Planned to scan the queued rows, it read all 2,000 every time.
    expect(((await rowsRead('plans_placing')) - before) / takes).toBeLessThan(100)
    inbox.close()
  })
})
