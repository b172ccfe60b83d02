/**
 * PostgresInbox against a real Postgres (initdb + pg_ctl into a temp dir): the shared inbox
 * contract on a fresh table per case; ten connections racing to append one key (new, expired
 * and processed, or shared by deliveries with several keys) with exactly one accepted; three
 * workers draining 200 deliveries received through createWebhookReceiver, each handler success
 * exactly once; a late take handing its leases back; bodies byte for byte; statements per
 * operation; sweep; options; and append rejecting within timeoutMs while the server is stopped,
 * then recovering on the same pool.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createInboxWorker, createWebhookReceiver, type InboxDelivery, type InboxEntry } from 'svc-webhooks'
import { PostgresInbox, createInboxTableSql } from 'svc-webhooks/postgres'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres, startPostgresServer, type PostgresServer } from '../support/postgres-server.js'
import { eventually } from '../stores/contract.js'
import { describeInboxContract, inboxDelivery } from './contract.js'

const SECRET = 'svc_whsec_postgres_inbox_tests'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithPostgres('PostgresInbox', () => {
  let server: PostgresServer
  let pool: pg.Pool
  let tables = 0
  /** A PostgresInbox on a table of its own, created. */
  async function freshInbox(options: { retentionMs?: number; timeoutMs?: number; pool?: pg.Pool } = {}) {
    const inbox = new PostgresInbox({ pool: options.pool ?? pool, table: `inbox_t${++tables}`, ...options })
    await inbox.ensureTable()
    return inbox
  }
  async function rows(sql: string, values: unknown[] = []) {
    return (await pool.query(sql, values)).rows
  }

  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 20 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  describeInboxContract('PostgresInbox', ({ retentionMs }) => freshInbox({ retentionMs }))

  describe('ten connections appending at once', () => {
    const CONNECTIONS = 10
    const ROUNDS = 5
    let clients: pg.Client[]
    let locker: pg.Client
    beforeAll(async () => {
      clients = Array.from({ length: CONNECTIONS }, () => new pg.Client({ connectionString: server.url }))
      locker = new pg.Client({ connectionString: server.url })
      await Promise.all([...clients, locker].map((client) => client.connect()))
    })
    afterAll(async () => {
      await Promise.all([...(clients ?? []), locker].map((client) => client?.end()))
    })

    /** How many backends wait on a lock (the cases of this file run one at a time). */
    async function blockedBackends(): Promise<number> {
      return (await rows('SELECT count(*)::int AS n FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0'))[0].n
    }

    /**
     * Runs one append per connection while `table`'s keys table is locked against writes, and
     * lets them all go once every one waits: they then race for the keys, not one after another.
     */
    async function race(table: string, make: (i: number) => InboxDelivery, retentionMs = 60_000): Promise<string[]> {
      const inboxes = clients.map((client) => new PostgresInbox({ client, table, retentionMs, timeoutMs: 10_000 }))
      await locker.query('BEGIN')
      try {
        await locker.query(`LOCK TABLE "${table}_keys" IN SHARE MODE`)
        const running = Promise.all(inboxes.map((inbox, i) => inbox.append(make(i))))
        expect(await eventually(async () => (await blockedBackends()) === CONNECTIONS)).toBe(true)
        await locker.query('COMMIT')
        return await running
      } finally {
        await locker.query('ROLLBACK').catch(() => undefined)
      }
    }
    const tally = (results: string[]) => results.reduce<Record<string, number>>((t, r) => ((t[r] = (t[r] ?? 0) + 1), t), {})
    const exactlyOne = { accepted: 1, duplicate: CONNECTIONS - 1 }

    it('a new key: exactly one accepted, one row queued', async () => {
      const inbox = await freshInbox()
      for (let round = 0; round < ROUNDS; round++) {
        const d = inboxDelivery()
        expect(tally(await race(inbox.table, () => ({ ...d, receivedAt: Date.now() })))).toEqual(exactlyOne)
        expect(await rows(`SELECT count(*)::int AS n FROM "${inbox.table}" WHERE key = $1`, [d.keys[0]])).toEqual([{ n: 1 }])
      }
      expect((await inbox.stats()).depth).toBe(ROUNDS)
    })

    it('a processed key past its retention (not swept): exactly one takes it over', async () => {
      const inbox = await freshInbox({ retentionMs: 1 })
      for (let round = 0; round < ROUNDS; round++) {
        const d = inboxDelivery()
        expect(await inbox.append(d)).toBe('accepted')
        // Processes it, and the previous round's winner with it.
        for (const entry of await inbox.take(100, 10_000)) expect(await inbox.complete(entry)).toBe(true)
        await sleep(5)
        expect(tally(await race(inbox.table, () => ({ ...d, receivedAt: Date.now() }), 60_000))).toEqual(exactlyOne)
        expect(await rows(`SELECT count(*)::int AS n FROM "${inbox.table}" WHERE key = $1`, [d.keys[0]])).toEqual([{ n: 1 }])
      }
      expect((await inbox.stats()).depth).toBe(1)
    })

    it('deliveries with two keys sharing one (one transaction each): exactly one accepted, no key of the others kept', async () => {
      const inbox = await freshInbox()
      for (let round = 0; round < ROUNDS; round++) {
        const shared = `tenant:v1 replay ${randomUUID()}`
        const made = Array.from({ length: CONNECTIONS }, () => inboxDelivery())
        const results = await race(inbox.table, (i) => ({ ...made[i]!, keys: [made[i]!.keys[0]!, shared] }))
        expect(tally(results)).toEqual(exactlyOne)
        const winner = made[results.indexOf('accepted')]!
        const kept = await rows(`SELECT key FROM "${inbox.table}_keys" WHERE key = ANY ($1) ORDER BY key`, [[shared, ...made.map((d) => d.keys[0])]])
        expect(kept.map((r: { key: string }) => r.key)).toEqual([winner.keys[0], shared].sort())
        // A loser's own key was rolled back with its transaction: it can be appended on its own.
        const loser = made[results.indexOf('duplicate')]!
        expect(await inbox.append(loser)).toBe('accepted')
      }
    })
  })

  it('three workers process 200 deliveries received through createWebhookReceiver, each handler success exactly once', async () => {
    const table = `inbox_t${++tables}`
    const pools = Array.from({ length: 3 }, () => {
      const own = new pg.Pool({ connectionString: server.url, max: 3 })
      own.on('error', () => {})
      return own
    })
    try {
      const inboxes = pools.map((own) => new PostgresInbox({ pool: own, table }))
      await inboxes[0]!.ensureTable()
      // v2 only (one key, one statement) and with allowV1 (two keys, one transaction).
      const receivers = [false, true].map((allowV1, i) => createWebhookReceiver({ secret: SECRET, inbox: inboxes[i]!, allowV1 }))
      const ids: string[] = Array.from({ length: 200 }, () => randomUUID())
      // The v1 replay key covers the timestamp and the body, not the id: each body is its own.
      const signed = await Promise.all(ids.map((id) => signWebhook({ secret: SECRET, event: sampleEvent('message.received', { conversation_id: id }), id })))
      const answers = await Promise.all(signed.map((s, i) => receivers[i % 2]!.handle({ method: 'POST', body: s.rawBody, headers: s.headers })))
      expect(answers.map((a) => a.status)).toEqual(ids.map(() => 202))

      const successes = new Map<string, number>()
      const failedOnce = new Set<string>()
      const outcomes: Record<string, number> = {}
      const workers = inboxes.map((inbox) =>
        createInboxWorker({
          inbox,
          concurrency: 4,
          pollIntervalMs: 20,
          firstRetryDelayMs: 50,
          visibilityTimeoutMs: 10_000,
          onError: () => {},
          onResult: (r) => void (outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1),
          on: {
            'message.received': async (_event, delivery) => {
              // Every tenth delivery fails its first attempt, so retries are part of the run.
              if (ids.indexOf(delivery.id) % 10 === 0 && !failedOnce.has(delivery.id)) {
                failedOnce.add(delivery.id)
                throw new Error('first attempt fails')
              }
              successes.set(delivery.id, (successes.get(delivery.id) ?? 0) + 1)
            },
          },
        }),
      )
      workers.forEach((w) => w.start())
      try {
        expect(await eventually(async () => successes.size === ids.length && (await inboxes[0]!.stats()).depth === 0, 400)).toBe(true)
      } finally {
        await Promise.all(workers.map((w) => w.stop(5_000)))
      }
      expect([...successes.values()].every((n) => n === 1)).toBe(true)
      expect([...successes.keys()].sort()).toEqual([...ids].sort())
      expect(outcomes).toEqual({ processed: 200, retrying: 20 })
      expect(await inboxes[0]!.stats()).toEqual({ depth: 0, oldestAgeMs: 0, retrying: 0, dead: 0 })
      const again = await receivers[0]!.handle({ method: 'POST', body: signed[0]!.rawBody, headers: signed[0]!.headers })
      expect(again.status).toBe(200)
    } finally {
      await Promise.all(pools.map((own) => own.end()))
    }
  })

  it('a take that lands after timeoutMs hands what it leased back at once, not after the visibility timeout', async () => {
    const inbox = await freshInbox({ timeoutMs: 300 })
    const d = inboxDelivery()
    await inbox.append(d)
    const locker = await pool.connect()
    try {
      await locker.query('BEGIN')
      await locker.query(`LOCK TABLE "${inbox.table}" IN EXCLUSIVE MODE`)
      await expect(inbox.take(1, 60_000)).rejects.toThrow(/PostgresInbox.take got no answer within 300 ms/)
      await locker.query('COMMIT')
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined)
      locker.release()
    }
    // The late take leased it for 60 s once the lock was gone, and gave it straight back.
    let again: InboxEntry | undefined
    expect(await eventually(async () => (again = (await inbox.take(1, 10_000))[0]) !== undefined)).toBe(true)
    expect(again).toMatchObject({ id: d.id, attempts: 0 })
  })

  it('every byte value, and a 1 MiB random body, round-trip byte for byte through take and dead()', async () => {
    const inbox = await freshInbox()
    const bodies = [Uint8Array.from({ length: 256 }, (_, i) => i), new Uint8Array(randomBytes(1024 * 1024))]
    for (const rawBody of bodies) expect(await inbox.append(inboxDelivery({ rawBody }))).toBe('accepted')
    const taken = await inbox.take(10, 10_000)
    expect(taken).toHaveLength(2)
    for (const entry of taken) {
      const sent = bodies.find((b) => b.length === entry.rawBody.length)!
      expect(Object.getPrototypeOf(entry.rawBody)).toBe(Uint8Array.prototype)
      expect(Buffer.from(entry.rawBody).equals(Buffer.from(sent))).toBe(true)
      await inbox.bury(entry, 'Error: kept for the test')
    }
    const dead = await inbox.dead()
    expect(dead).toHaveLength(bodies.length)
    for (const letter of dead) {
      const sent = bodies.find((b) => b.length === letter.rawBody.length)!
      expect(Buffer.from(letter.rawBody).equals(Buffer.from(sent))).toBe(true)
    }
  })

  it('one statement per operation; an append with two keys is BEGIN, the statement, COMMIT', async () => {
    const seen: string[] = []
    const record = (text: string) => void seen.push(/^\s*(BEGIN|COMMIT|ROLLBACK)\b/.exec(text)?.[1] ?? 'statement')
    const counting = {
      query: (text: string, values?: unknown[]) => (record(text), pool.query(text, values)),
      connect: async () => {
        const connection = await pool.connect()
        return {
          query: (text: string, values?: unknown[]) => (record(text), connection.query(text, values)),
          release: (destroy?: Error | boolean) => connection.release(destroy),
        }
      },
    }
    const table = `inbox_t${++tables}`
    await pool.query(createInboxTableSql(table))
    const inbox = new PostgresInbox({ pool: counting, table })
    const measure = async (what: string, run: () => Promise<unknown>) => {
      seen.length = 0
      await run()
      return [what, seen.join(' ')]
    }
    const taken: { a?: InboxEntry; b?: InboxEntry } = {}
    const one = inboxDelivery()
    const two = inboxDelivery({ keys: [`tenant:${randomUUID()}`, `tenant:v1 ${randomUUID()}`] })
    const costs = Object.fromEntries([
      await measure('append (1 key)', () => inbox.append(one)),
      await measure('append (2 keys)', () => inbox.append(two)),
      await measure('append duplicate (2 keys)', () => inbox.append(two)),
      await measure('take', async () => {
        const [a, b] = await inbox.take(2, 10_000)
        Object.assign(taken, { a, b })
      }),
      await measure('extend', () => inbox.extend(taken.a!, 10_000)),
      await measure('retry', () => inbox.retry(taken.a!, 0, 'x')),
      await measure('complete', () => inbox.complete(taken.b!)),
      await measure('stats', () => inbox.stats()),
      await measure('sweep', () => inbox.sweep()),
    ])
    console.info(`[PostgresInbox] statements per operation: ${JSON.stringify(costs)}`)
    expect(costs).toEqual({
      'append (1 key)': 'statement',
      'append (2 keys)': 'BEGIN statement COMMIT',
      'append duplicate (2 keys)': 'BEGIN statement ROLLBACK',
      take: 'statement',
      extend: 'statement',
      retry: 'statement',
      complete: 'statement',
      stats: 'statement',
      sweep: 'statement',
    })
  })

  it('sweep() deletes processed keys past their retention, and no key still held by a queued or dead delivery', async () => {
    const table = `inbox_t${++tables}`
    const shortLived = new PostgresInbox({ pool, table, retentionMs: 1 })
    await shortLived.ensureTable()
    const [processed, queued, buried] = [inboxDelivery(), inboxDelivery(), inboxDelivery({ keys: [`tenant:${randomUUID()}`, `tenant:v1 ${randomUUID()}`] })]
    await shortLived.append(processed)
    await shortLived.complete((await shortLived.take(1, 10_000))[0]!)
    await shortLived.append(buried)
    await shortLived.bury((await shortLived.take(1, 10_000))[0]!, 'Error: gave up')
    await shortLived.append(queued)
    await sleep(5)
    expect(await shortLived.sweep()).toBe(1)
    expect(await shortLived.sweep()).toBe(0)
    const left = await rows(`SELECT key FROM "${table}_keys" ORDER BY key`)
    expect(left.map((r: { key: string }) => r.key)).toEqual([...queued.keys, ...buried.keys].sort())
    expect(await shortLived.append({ ...processed, receivedAt: Date.now() })).toBe('accepted')
  })

  it('a schema-qualified table, created from createInboxTableSql() as a migration would', async () => {
    await pool.query('CREATE SCHEMA IF NOT EXISTS webhooks')
    await pool.query(createInboxTableSql('webhooks.inbox'))
    const inbox = new PostgresInbox({ pool, table: 'webhooks.inbox' })
    const d = inboxDelivery()
    expect(await inbox.append(d)).toBe('accepted')
    expect(await rows('SELECT key FROM webhooks.inbox_keys')).toEqual([{ key: d.keys[0] }])
  })

  it('refuses a table name that is not a plain identifier or is too long, a missing pool, a pool given as client, and a non-positive retention', () => {
    expect(() => new PostgresInbox({ pool, table: 'x; DROP TABLE y' })).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool, table: 'a'.repeat(49) })).toThrow(/at most 48/)
    expect(() => createInboxTableSql('a.b.c')).toThrow(TypeError)
    expect(() => new PostgresInbox({} as never)).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool: { query: pool.query.bind(pool) } as never })).toThrow(/connect/)
    expect(() => new PostgresInbox({ client: pool })).toThrow(/pass it as `pool`/)
    expect(() => new PostgresInbox({ pool, retentionMs: 0 })).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool, timeoutMs: -1 })).toThrow(TypeError)
  })

  // Last: it stops the server.
  it('server stopped: append rejects within timeoutMs (one key and two), then the same pool recovers once it is back', async () => {
    const TIMEOUT = 400
    const inbox = await freshInbox({ timeoutMs: TIMEOUT })
    await server.kill()
    const timings: number[] = []
    try {
      for (const keys of [[`tenant:${randomUUID()}`], [`tenant:${randomUUID()}`, `tenant:v1 ${randomUUID()}`]]) {
        const started = Date.now()
        await expect(inbox.append(inboxDelivery({ keys }))).rejects.toThrow(/PostgresInbox.append got no answer within 400 ms/)
        timings.push(Date.now() - started)
      }
    } finally {
      await server.start()
    }
    console.info(`[PostgresInbox] append with the server stopped rejected after ${timings.join(' and ')} ms (timeoutMs ${TIMEOUT})`)
    for (const elapsed of timings) {
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT - 5)
    }
    const d = inboxDelivery()
    expect(await eventually(async () => (await inbox.append(d).catch(() => 'down')) !== 'down')).toBe(true)
    expect(await inbox.append(d)).toBe('duplicate')
    expect((await inbox.stats()).depth).toBe(1)
  })
})
