/**
 * PostgresInbox given `ordering` against a real Postgres: appends file each delivery, and an
 * ordered take with `filed` places what was filed in the database, never handing it out to be
 * placed; deliveries appended unfiled are still placed by a worker, before any head runs. Takes
 * racing on filed rows place each once and lease one row per key; tables of the version before
 * filing are upgraded by ensureTable(), and an inbox without `ordering` still appends to them.
 */
import fc from 'fast-check'
import { expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { byConversation, InboxError, type InboxEntry, type OrderedEntry, type OrderedTake } from 'svc-webhooks'
import { describeWithPostgres } from '../support/services.js'
import { usePostgresServer } from '../support/postgres.js'
import { orderViolations } from '../../tools/order/check.mjs'
import { messageBody } from '../../tools/order/run.mjs'
import { delivery, runScenario, scenarios } from './support/ordering-run.js'

const filed = { placeLeaseMs: 5_000, poke: [], filed: { strict: true } }

describeWithPostgres('PostgresInbox given `ordering`: takes place what appends filed', () => {
  const postgres = usePostgresServer({ max: 14 })
  let n = 0

  /** An inbox on `table` filing by conversation (or not, with `ordering: false`), its tables made. */
  async function inboxOn(table: string, { ordering = true } = {}): Promise<PostgresInbox> {
    const inbox = new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false, ...(ordering && { ordering: byConversation }) })
    await inbox.ensureTable()
    return inbox
  }
  /** Delivery `d<i>-<conversation>` of `conversation`, `index` its created_at second. */
  const append = (inbox: PostgresInbox, conversation: number, index: number) =>
    inbox.append(delivery(`d${index}-${conversation}`, messageBody(conversation, index), Date.now()))
  const conversationOf = (entry: InboxEntry) => entry.id.split('-')[1]!
  const indexOf = (entry: InboxEntry) => Number(entry.id.split('-')[0]!.slice(1))
  async function doubled(table: string) {
    return (await postgres.pool.query(`SELECT order_key FROM ${table} WHERE lease IS NOT NULL AND visible_at > now() AND order_key IS NOT NULL GROUP BY 1 HAVING count(*) > 1`)).rows
  }

  it('per key: in created_at order among those present, one at a time, each run once, with workers taking the ordering from their inbox', async () => {
    await fc.assert(
      fc.asyncProperty(scenarios, async (s) => {
        const inbox = new PostgresInbox({ pool: postgres.pool, table: `filed_${++n}`, ordering: { key: byConversation, strict: s.strict } })
        await inbox.ensureTable()
        const record = await runScenario(inbox, s)
        expect(orderViolations({ ...record, strict: s.strict })).toEqual([])
        expect((await inbox.stats()).depth).toBe(0)
        inbox.close()
      }),
      { numRuns: 15 },
    )
  }, 240_000)

  it('filed deliveries are placed by the take itself: no place handed out, heads in order across keys', async () => {
    const inbox = await inboxOn('filed_heads')
    // Appended newest first: the order is the filing's, not the arrival's.
    for (const index of [5, 4, 3, 2, 1, 0]) await append(inbox, index % 3, index)
    const ran: InboxEntry[] = []
    for (let round = 0; round < 4; round++) {
      const taken = await inbox.takeOrdered(10, 60_000, filed)
      expect(taken.place).toEqual([])
      expect(taken.busy).toBe(false)
      if (round < 2) expect(taken.run.map(conversationOf).sort()).toEqual(['0', '1', '2'])
      for (const entry of taken.run) {
        ran.push(entry)
        expect(await inbox.complete(entry)).toBe(true)
      }
    }
    expect(ran.slice(0, 3).map(indexOf).sort()).toEqual([0, 1, 2])
    expect(ran.slice(3).map(indexOf).sort()).toEqual([3, 4, 5])
    expect((await inbox.stats()).depth).toBe(0)
  })

  it('a delivery filed alone (its key starts with NUL) is stored and run, and so is one a worker places alone', async () => {
    const inbox = await inboxOn('filed_alone')
    const other = new TextEncoder().encode(JSON.stringify({ event: 'conversation.closed', conversation_id: 'c' }))
    await inbox.append(delivery('filed', other, Date.now()))
    const first = await inbox.takeOrdered(10, 60_000, filed)
    expect(first.run.map((entry) => [entry.id, entry.orderKey])).toEqual([['filed', '\u0000alone:default:filed']])
    // Without `filed`, the worker places it, under the same kind of key.
    await inbox.append(delivery('placed', other, Date.now()))
    const handed = await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(handed.place.map((entry) => entry.id)).toEqual(['placed'])
    expect(await inbox.place([{ entry: handed.place[0]!, key: '\u0000alone:default:placed', order: '0'.repeat(33), strict: true }])).toEqual([true])
    const second = await inbox.takeOrdered(10, 60_000, filed)
    expect(second.run.map((entry) => [entry.id, entry.orderKey])).toEqual([['placed', '\u0000alone:default:placed']])
  })

  it('an unfiled older delivery (appended by an inbox without `ordering`) blocks heads until the worker places it', async () => {
    const inbox = await inboxOn('filed_mixed')
    const plain = await inboxOn('filed_mixed', { ordering: false })
    await append(plain, 0, 0)
    await append(inbox, 0, 1)
    await append(inbox, 1, 2)
    const first = await inbox.takeOrdered(10, 60_000, filed)
    expect(first.place.map((entry) => entry.id)).toEqual(['d0-0'])
    expect(first.run).toEqual([])
    // Placing it: the filed ones were placed meanwhile, and the head of conversation 0 is the unfiled one.
    expect((await inbox.takeOrdered(10, 60_000, filed)).busy).toBe(true)
    expect(await inbox.place([{ entry: first.place[0]!, key: 'conv-0', order: '0'.repeat(33), strict: true }])).toEqual([true])
    const heads = await inbox.takeOrdered(10, 60_000, filed)
    expect(heads.place).toEqual([])
    expect(heads.run.map((entry) => entry.id).sort()).toEqual(['d0-0', 'd2-1'])
  })

  it('a take without `options.filed` ignores filings: every delivery is handed out to be placed', async () => {
    const inbox = await inboxOn('filed_ignored')
    for (const index of [0, 1, 2]) await append(inbox, index, index)
    const taken = await inbox.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(taken.place.map((entry) => entry.id).sort()).toEqual(['d0-0', 'd1-1', 'd2-2'])
    expect(taken.run).toEqual([])
    expect((await postgres.pool.query('SELECT count(*)::int AS n FROM filed_ignored WHERE order_key IS NOT NULL')).rows[0].n).toBe(0)
  })

  it('12 takes racing on 2,500 filed deliveries: each placed once, never two leases of a key, every key in order', async () => {
    const table = 'filed_race'
    const inbox = await inboxOn(table)
    // Every placing of a row (order_key set) recorded: a delivery placed twice shows twice.
    await postgres.pool.query(`CREATE TABLE ${table}_placings (key text NOT NULL);
CREATE FUNCTION ${table}_placed() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN INSERT INTO ${table}_placings VALUES (NEW.key); RETURN NULL; END $fn$;
CREATE TRIGGER ${table}_placed AFTER UPDATE ON ${table} FOR EACH ROW WHEN (OLD.order_key IS NULL AND NEW.order_key IS NOT NULL) EXECUTE FUNCTION ${table}_placed();`)
    const total = 2500
    for (let from = 0; from < total; from += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => append(inbox, (from + i) % 40, from + i)))
    }
    const ran = new Map<string, number[]>()
    let busy = 0
    for (let round = 0; round < 400 && (await inbox.stats()).depth > 0; round++) {
      const takes: OrderedTake[] = await Promise.all(Array.from({ length: 12 }, () => inbox.takeOrdered(4, 60_000, filed)))
      expect(takes.flatMap((take) => take.place)).toEqual([])
      busy += takes.filter((take) => take.busy).length
      expect(await doubled(table)).toEqual([])
      const run: OrderedEntry[] = takes.flatMap((take) => take.run)
      expect(new Set(run.map((entry) => entry.orderKey)).size).toBe(run.length)
      for (const entry of run) {
        ran.set(conversationOf(entry), [...(ran.get(conversationOf(entry)) ?? []), indexOf(entry)])
        expect(await inbox.complete(entry)).toBe(true)
      }
    }
    expect((await inbox.stats()).depth).toBe(0)
    // More were due than one take places: the first takes found the rest still unplaced.
    expect(busy).toBeGreaterThan(0)
    const placings = (await postgres.pool.query(`SELECT count(*)::int AS n, count(DISTINCT key)::int AS once FROM ${table}_placings`)).rows[0]
    expect(placings).toEqual({ n: total, once: total })
    expect(ran.size).toBe(40)
    for (const indexes of ran.values()) expect(indexes).toEqual([...indexes].sort((a, b) => a - b))
  }, 60_000)

  it('ensureTable adds the filing columns and function to a table of the version before filing', async () => {
    const table = 'filed_upgrade'
    const inbox = await inboxOn(table)
    await postgres.pool.query(`DROP FUNCTION ${table}_take_filed; ALTER TABLE ${table} DROP COLUMN filed_key, DROP COLUMN filed_at`)
    await inbox.ensureTable()
    const columns = await postgres.pool.query(`SELECT attname FROM pg_attribute WHERE attrelid = '${table}'::regclass AND attname LIKE 'filed%' AND NOT attisdropped ORDER BY 1`)
    expect(columns.rows.map((row) => row.attname)).toEqual(['filed_at', 'filed_key'])
    await append(inbox, 0, 0)
    const taken = await inbox.takeOrdered(10, 60_000, filed)
    expect([taken.place, taken.run.map((entry) => entry.id)]).toEqual([[], ['d0-0']])
  })

  it('an inbox without `ordering` appends and takes with the statements of the version before filing, on a table not upgraded', async () => {
    const table = 'filed_old'
    await inboxOn(table)
    await postgres.pool.query(`DROP FUNCTION ${table}_take_filed; ALTER TABLE ${table} DROP COLUMN filed_key, DROP COLUMN filed_at`)
    const plain = new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false })
    expect(await append(plain, 0, 0)).toBe('accepted')
    const taken = await plain.takeOrdered(10, 60_000, { placeLeaseMs: 5_000, poke: [] })
    expect(taken.place.map((entry) => entry.id)).toEqual(['d0-0'])
    // An inbox given `ordering` needs this version's columns: refused, not a silent unfiled append.
    const filing = new PostgresInbox({ pool: postgres.pool, table, maintenanceIntervalMs: false, ordering: byConversation })
    const refused = await append(filing, 0, 1).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(InboxError)
    expect((refused as InboxError).kind).toBe('refused')
  })
})
