/**
 * Ordering on PostgresInbox against a real Postgres: the same scenarios as the MemoryInbox
 * properties (fewer runs: each is real round trips), with several workers sharing one database,
 * so the order is kept by the engine and not by one process; takes racing on one key (free, and
 * just expired) on separate connections, never two leases of a key; maintenance deleting the
 * rows of idle keys only; and the ordering tables of the version before per-key locks upgraded.
 * The multi-process run with kill -9 is test/inbox/ordering-processes.test.ts.
 */
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { describeWithPostgres } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { orderViolations } from '../../tools/order/check.mjs'
import { byConversation, createInboxWorker, type InboxEntry, type OrderedTake } from 'svc-webhooks'
import { messageBody } from '../../tools/order/run.mjs'
import { delivery, raceModeClaims, runMixedWorkers, runScenario, scenarios } from './support/ordering-run.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithPostgres('ordering on PostgresInbox', () => {
  const postgres = usePostgresServer({ max: 12 })
  let n = 0

  it('per key: in created_at order among those present, one at a time, each run once, late marked', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const inbox = new PostgresInbox({ pool: postgres.pool, table: `order_${++n}` })
        await inbox.ensureTable()
        const record = await runScenario(inbox, s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
      }),
      { numRuns: 25 },
    )
  }, 240_000)

  it('an ordered and an unordered worker marking at the same moment: exactly one gets its mark', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_mode_race' })
    await inbox.ensureTable()
    await raceModeClaims(inbox)
  })

  it('a worker with `ordering` and one without on the same inbox: the later one takes nothing, says why, and goes on once the other stops', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_mixed' })
    await inbox.ensureTable()
    await runMixedWorkers(inbox)
  }, 60_000)

  it('sweep() deletes the last-order record of a key idle past the retention', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_sweep', retentionMs: 100 })
    await inbox.ensureTable()
    await inbox.append({ keys: ['a'], endpoint: 'default', id: 'a', timestamp: 1, signatureVersion: 'v2', secretIndex: 0, rawBody: messageBody(1, 0), receivedAt: Date.now() })
    const worker = createInboxWorker({ inbox, ordering: byConversation, pollIntervalMs: 5, log: false, on: { 'message.received': async () => undefined } })
    worker.start()
    for (let i = 0; i < 200 && (await inbox.stats()).depth > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    await worker.stop()
    const count = async () => Number((await postgres.pool.query('SELECT count(*) AS n FROM order_sweep_order')).rows[0].n)
    expect(await count()).toBe(1)
    await new Promise((resolve) => setTimeout(resolve, 200))
    await inbox.sweep()
    expect(await count()).toBe(0)
  })
  /** Deliveries `d<i>` of the given keys appended and placed (strict) in that order, index as order. */
  async function placed(inbox: PostgresInbox, keys: string[]): Promise<void> {
    for (const [i, key] of keys.entries()) await inbox.append(delivery(`d${i}-${key}`, messageBody(i, i), Date.now()))
    const orderOf = new Map(keys.map((key, i) => [`d${i}-${key}`, { key, order: String(i).padStart(6, '0') }]))
    let taken: OrderedTake
    do {
      taken = await inbox.takeOrdered(0, 60_000, { placeLeaseMs: 5_000, poke: [] })
      const placements = taken.place.map((entry) => ({ entry, ...orderOf.get(entry.id)!, strict: true }))
      expect(await inbox.place(placements)).toEqual(placements.map(() => true))
    } while (taken.place.length > 0)
  }
  /** `takers` ordered takes of `max` at once, each on a connection of its own: what they leased. */
  async function race(inbox: PostgresInbox, takers: number, max: number, visibilityMs = 60_000): Promise<InboxEntry[]> {
    const takes = await Promise.all(Array.from({ length: takers }, () => inbox.takeOrdered(max, visibilityMs, { placeLeaseMs: 5_000, poke: [] })))
    return takes.flatMap((take) => take.run)
  }
  const keyOf = (entry: InboxEntry) => entry.id.split('-').slice(1).join('-')
  /** Keys with more than one lease held now: must always be none. */
  async function doubled(table: string) {
    return (await postgres.pool.query(`SELECT order_key FROM ${table} WHERE lease IS NOT NULL AND visible_at > now() AND order_key IS NOT NULL GROUP BY 1 HAVING count(*) > 1`)).rows
  }

  it('takes racing on one key never both get it: a free head, the next after a complete, a head whose lease just expired', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_race', maintenanceIntervalMs: false })
    await inbox.ensureTable()
    await placed(inbox, Array.from({ length: 6 }, () => 'hot'))
    for (let round = 0; round < 3; round++) {
      const won = await race(inbox, 12, 3)
      expect(won.map((entry) => entry.id)).toEqual([`d${round}-hot`])
      expect(await doubled('order_race')).toEqual([])
      expect(await inbox.complete(won[0]!)).toBe(true)
    }
    // A worker that dies holding the head: the key is free once its lease has run out, to one taker.
    const [held] = await race(inbox, 12, 3, 300)
    expect(held?.id).toBe('d3-hot')
    expect(await race(inbox, 12, 3)).toEqual([])
    await sleep(400)
    const again = await race(inbox, 12, 3)
    expect(again.map((entry) => [entry.id, entry.takes])).toEqual([['d3-hot', 2]])
    expect(await inbox.complete(held!)).toBe(false)
    expect(await doubled('order_race')).toEqual([])
  })

  it('takes racing on many keys: each key to one taker at most, different keys to different takers, every head taken', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_race_many', maintenanceIntervalMs: false })
    await inbox.ensureTable()
    const keys = Array.from({ length: 40 }, (_, i) => `k${i % 20}`)
    await placed(inbox, keys)
    const won = await race(inbox, 10, 4)
    expect(new Set(won.map(keyOf)).size).toBe(won.length)
    expect(won.every((entry) => Number(entry.id.split('-')[0]!.slice(1)) < 20)).toBe(true)
    expect(await doubled('order_race_many')).toEqual([])
    // What the racing takes locked and passed over is still there for the next take.
    const rest = await inbox.takeOrdered(100, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(new Set([...won, ...rest.run].map(keyOf)).size).toBe(20)
    expect(won.length + rest.run.length).toBe(20)
  })

  it('maintenance deletes the rows of keys idle past the retention, never one with a delivery pending or running, and a requeued dead letter wakes its key again', async () => {
    const inbox = new PostgresInbox({ pool: postgres.pool, table: 'order_maint', retentionMs: 100, maintenanceIntervalMs: false })
    await inbox.ensureTable()
    await placed(inbox, ['idle', 'running', 'pending', 'pending', 'dead'])
    const first = await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    const byKey = new Map(first.run.map((entry) => [keyOf(entry), entry]))
    expect([...byKey.keys()].sort()).toEqual(['dead', 'idle', 'pending', 'running'])
    expect(await inbox.complete(byKey.get('idle')!)).toBe(true)
    expect(await inbox.bury(byKey.get('dead')!, 'boom')).toBe(true)
    expect(await inbox.retry(byKey.get('pending')!, 60_000, 'later')).toBe(true)
    await sleep(200)
    const keyRows = async () => (await postgres.pool.query('SELECT order_key FROM order_maint_order ORDER BY 1')).rows.map((row) => row.order_key as string)
    expect(await keyRows()).toEqual(['dead', 'idle', 'pending', 'running'])
    const round = await inbox.maintain()
    expect(round.locked).toBe(true)
    expect(await keyRows()).toEqual(['pending', 'running'])
    // Nothing was lost: the dead letter requeued runs, and the running key goes on after its head.
    expect(await inbox.requeue('default:d4-dead')).toBe(true)
    const next = await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(next.run.map((entry) => entry.id)).toEqual(['d4-dead'])
    expect(await keyRows()).toEqual(['dead', 'pending', 'running'])
    expect(await inbox.complete(byKey.get('running')!)).toBe(true)
    expect(await inbox.complete(next.run[0]!)).toBe(true)
    await sleep(200)
    await inbox.maintain()
    expect(await keyRows()).toEqual(['pending'])
  })

  it('ensureTable upgrades the ordering tables of the version before per-key locks: deliveries placed then are taken', async () => {
    const table = 'order_upgrade'
    const inbox = new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false })
    await inbox.ensureTable()
    // As that version left them: no ready_at, no key row until a key's first complete, no _order_free trigger.
    await postgres.pool.query(`DROP TRIGGER ${table}_order_free ON ${table}; DROP INDEX ${table}_order_ready; ALTER TABLE ${table}_order DROP COLUMN ready_at;
CREATE OR REPLACE FUNCTION ${table}_order_done() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.order_key IS NOT NULL AND OLD.state = 'queued' THEN
    INSERT INTO ${table}_order AS o (order_key, last) VALUES (OLD.order_key, OLD.order_at)
    ON CONFLICT (order_key) DO UPDATE SET last = GREATEST(o.last, EXCLUDED.last), updated_at = now();
  END IF;
  RETURN NULL;
END $fn$;`)
    for (const [i, key] of ['a', 'a', 'b'].entries()) await inbox.append(delivery(`d${i}-${key}`, messageBody(i, i), Date.now()))
    await postgres.pool.query(`UPDATE ${table} SET order_key = split_part(id, '-', 2), order_at = lpad(substr(split_part(id, '-', 1), 2), 6, '0'), order_strict = true`)
    await postgres.pool.query(`INSERT INTO ${table}_order (order_key, last) VALUES ('b', '000000')`)
    await inbox.ensureTable()
    const taken = await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(taken.run.map((entry) => [entry.id, (entry as { late?: boolean }).late]).sort()).toEqual([
      ['d0-a', false],
      ['d2-b', false],
    ])
    expect(await inbox.complete(taken.run.find((entry) => entry.id === 'd0-a')!)).toBe(true)
    expect((await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })).run.map((entry) => entry.id)).toEqual(['d1-a'])
  })
})
