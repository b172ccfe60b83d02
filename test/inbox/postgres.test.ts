/**
 * PostgresInbox against a real Postgres (initdb + pg_ctl into a temp dir): the shared inbox
 * contract on a fresh table per case; ten connections racing to append one key (new, expired
 * and processed, or shared by deliveries with several keys) with exactly one accepted; three
 * workers draining 200 deliveries received through createWebhookReceiver, each handler success
 * exactly once; a late take handing its leases back, uncounted; bodies byte for byte; statements
 * per operation; sweep; options (`client` refused: it never reconnects); a NUL in an error text
 * refused at once; a table of the previous version upgraded by ensureTable; durability
 * warnings; append rejecting within timeoutMs while the server is stopped, then recovering on the
 * same pool; and on a server of its own with fsync on: acks that committed before a restart
 * answered true when repeated, and the same inbox answering again after kill -9 of every
 * Postgres process.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createInboxWorker, createWebhookReceiver, isInboxError, type InboxDelivery, type InboxEntry } from 'svc-webhooks'
import { PostgresInbox, createInboxTableSql } from 'svc-webhooks/postgres'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { eventually } from '../stores/contract.js'
import { describeInboxContract, inboxDelivery } from './contract.js'

const SECRET = 'svc_whsec_postgres_inbox_tests'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The inbox tables as the previous version created them (before takes, retries_since and the ack leases). */
const PREVIOUS_TABLES = (table: string) => `CREATE TABLE "${table}" (
  key text PRIMARY KEY, keys text[] NOT NULL, endpoint text NOT NULL, id text NOT NULL, signed_timestamp bigint NOT NULL,
  signature_version text NOT NULL, secret_index integer NOT NULL, body bytea NOT NULL, received_at timestamptz NOT NULL,
  state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'dead')), attempts integer NOT NULL DEFAULT 0,
  last_error text, visible_at timestamptz NOT NULL, lease text, dead_at timestamptz
);
CREATE INDEX "${table}_visible" ON "${table}" (visible_at) WHERE state = 'queued';
CREATE TABLE "${table}_keys" (key text PRIMARY KEY, delivery text NOT NULL, processed_until timestamptz);`

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
    // One connection each (a Pool of one: the inbox takes no single Client, which cannot reconnect).
    let pools: pg.Pool[]
    let locker: pg.Client
    beforeAll(async () => {
      pools = Array.from({ length: CONNECTIONS }, () => new pg.Pool({ connectionString: server.url, max: 1 }))
      locker = new pg.Client({ connectionString: server.url })
      await locker.connect()
    })
    afterAll(async () => {
      await Promise.all([...(pools ?? []), locker].map((client) => client?.end()))
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
      const inboxes = pools.map((own) => new PostgresInbox({ pool: own, table, retentionMs, timeoutMs: 10_000 }))
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
      expect(await inboxes[0]!.stats()).toEqual({ depth: 0, oldestAgeMs: 0, retrying: 0, dead: 0, paused: false })
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
      await expect(inbox.take(1, 60_000)).rejects.toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/PostgresInbox.take got no answer within 300 ms/) })
      await locker.query('COMMIT')
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined)
      locker.release()
    }
    // The late take leased it for 60 s once the lock was gone, and gave it straight back.
    let again: InboxEntry | undefined
    expect(await eventually(async () => (again = (await inbox.take(1, 10_000))[0]) !== undefined)).toBe(true)
    // takes 1: the hand-back uncounted the take nobody ran.
    expect(again).toMatchObject({ id: d.id, attempts: 0, takes: 1 })
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

  it('refuses a table name that is not a plain identifier or is too long, a missing pool, any `client` (it would never reconnect), and a non-positive retention', async () => {
    expect(() => new PostgresInbox({ pool, table: 'x; DROP TABLE y' })).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool, table: 'a'.repeat(49) })).toThrow(/at most 48/)
    expect(() => createInboxTableSql('a.b.c')).toThrow(TypeError)
    expect(() => new PostgresInbox({} as never)).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool: { query: pool.query.bind(pool) } as never })).toThrow(/connect/)
    expect(() => new PostgresInbox({ client: pool } as never)).toThrow(/takes `pool`/)
    const client = new pg.Client({ connectionString: server.url })
    await client.connect()
    try {
      expect(() => new PostgresInbox({ client } as never)).toThrow(/a pg.Client does not reconnect after the database restarts/)
    } finally {
      await client.end()
    }
    expect(() => new PostgresInbox({ pool, retentionMs: 0 })).toThrow(TypeError)
    expect(() => new PostgresInbox({ pool, timeoutMs: -1 })).toThrow(TypeError)
  })

  it('a NUL in the error text is refused by Postgres: retry and bury reject at once (refused, not unavailable), and the lease is still held', async () => {
    const inbox = await freshInbox({ timeoutMs: 5_000 })
    let statements = 0
    const counting = { query: (text: string, values?: unknown[]) => (statements++, pool.query(text, values)), connect: () => pool.connect() }
    const counted = new PostgresInbox({ pool: counting, table: inbox.table, timeoutMs: 5_000 })
    await inbox.append(inboxDelivery())
    const [entry] = await counted.take(1, 60_000)
    for (const ack of [() => counted.retry(entry!, 0, 'a\u0000b'), () => counted.bury(entry!, 'a\u0000b')]) {
      statements = 0
      const error = await ack().catch((e: unknown) => e)
      expect(isInboxError(error)).toBe(true)
      expect(error).toMatchObject({ kind: 'refused', message: expect.stringMatching(/was refused by the server: invalid byte sequence for encoding "UTF8": 0x00/) })
      expect((error as Error).message).not.toMatch(/reachable/)
      expect(Object.keys((error as Error).cause as object).sort()).toEqual(['message', 'name'])
      // Not repeated until the deadline: one statement.
      expect(statements).toBe(1)
    }
    expect(await counted.retry(entry!, 0, 'a b')).toBe(true)
    const [again] = await counted.take(1, 60_000)
    expect(again).toMatchObject({ attempts: 1, takes: 2, lastError: 'a b' })
  })

  it('a table that was never created: append is refused at once with the database\'s reason, not reported unreachable', async () => {
    const inbox = new PostgresInbox({ pool, table: 'never_created', timeoutMs: 5_000 })
    const error = await inbox.append(inboxDelivery()).catch((e: unknown) => e)
    expect(error).toMatchObject({ name: 'InboxError', kind: 'refused', operation: 'PostgresInbox.append', message: expect.stringMatching(/was refused by the server: relation "never_created(_keys)?" does not exist/) })
  })

  it('ensureTable upgrades a table created by the previous version: its rows are taken with takes counted and retriesSince from receivedAt', async () => {
    const table = `inbox_t${++tables}`
    await pool.query(PREVIOUS_TABLES(table))
    const receivedAt = Date.now() - 60_000
    await pool.query(
      `INSERT INTO "${table}" (key, keys, endpoint, id, signed_timestamp, signature_version, secret_index, body, received_at, visible_at) VALUES ('old:1', '{old:1}', 'old', '1', 1763806530, 'v2', 0, '\x7b7d', to_timestamp($1::float8 / 1000), now())`,
      [receivedAt],
    )
    await pool.query(`INSERT INTO "${table}_keys" (key, delivery) VALUES ('old:1', 'old:1')`)
    const inbox = new PostgresInbox({ pool, table })
    await inbox.ensureTable()
    // Once upgraded, ensureTable alters nothing: it does not wait for a transaction reading the
    // table (an ALTER TABLE would, for its ACCESS EXCLUSIVE lock).
    const reader = await pool.connect()
    try {
      await reader.query('BEGIN')
      await reader.query(`LOCK TABLE "${table}" IN ACCESS SHARE MODE`)
      await new PostgresInbox({ pool, table, timeoutMs: 1_000 }).ensureTable()
    } finally {
      await reader.query('ROLLBACK')
      reader.release()
    }
    const [entry] = await inbox.take(1, 60_000)
    expect(entry).toMatchObject({ id: '1', attempts: 0, takes: 1, retriesSince: receivedAt, receivedAt })
    expect(await inbox.complete(entry!)).toBe(true)
    expect(await inbox.complete(entry!)).toBe(true)
    expect(await inbox.append(inboxDelivery({ keys: ['old:1'] }))).toBe('duplicate')
  })

  it('durabilityWarnings: fsync off (this suite\'s server) and synchronous_commit off are reported', async () => {
    const inbox = await freshInbox()
    const warnings = await inbox.durabilityWarnings()
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/fsync off/)
    const lax = new pg.Pool({ connectionString: server.url, max: 1, options: '-c synchronous_commit=off' })
    try {
      const both = await new PostgresInbox({ pool: lax, table: inbox.table }).durabilityWarnings()
      expect(both).toHaveLength(2)
      expect(both[1]).toMatch(/synchronous_commit is off/)
    } finally {
      await lax.end()
    }
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
        await expect(inbox.append(inboxDelivery({ keys }))).rejects.toMatchObject({
          name: 'InboxError',
          kind: 'unavailable',
          operation: 'PostgresInbox.append',
          message: expect.stringMatching(/PostgresInbox.append got no answer within 400 ms/),
        })
        timings.push(Date.now() - started)
      }
      expect(await inbox.durabilityWarnings()).toEqual([expect.stringMatching(/^svc-webhooks: PostgresInbox could not check the database's fsync and synchronous_commit settings \(PostgresInbox.durabilityWarnings got no answer/)])
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

  describe('the database restarted or killed (its own server, fsync on)', () => {
    let durable: PostgresServer
    // No 'error' listener of its own: the inbox keeps a restart's dropped idle connections from
    // ending the process.
    let bare: pg.Pool
    beforeAll(async () => {
      durable = await startPostgresServer({ fsync: true })
      bare = new pg.Pool({ connectionString: durable.url, max: 4 })
    })
    afterAll(async () => {
      await bare?.end()
      await durable?.stop()
    })

    it('durabilityWarnings: none with fsync and synchronous_commit on', async () => {
      expect(await new PostgresInbox({ pool: bare, table: 'warnings' }).durabilityWarnings()).toEqual([])
    })

    it('acks that committed before a restart: the same lease repeating complete, retry or bury afterwards answers true, another lease false', async () => {
      const inbox = new PostgresInbox({ pool: bare, table: 'acks', timeoutMs: 15_000 })
      await inbox.ensureTable()
      const sent = [inboxDelivery(), inboxDelivery(), inboxDelivery()]
      for (const d of sent) await inbox.append(d)
      const taken = await inbox.take(3, 60_000)
      const [done, failed, buried] = sent.map((d) => taken.find((entry) => entry.id === d.id)!)
      expect(await inbox.complete(done!)).toBe(true)
      expect(await inbox.retry(failed!, 60_000, 'Error: once')).toBe(true)
      expect(await inbox.bury(buried!, 'Error: gave up')).toBe(true)
      // The worker never saw those answers (a restart cut the connection): it repeats each ack.
      await durable.kill()
      await durable.start()
      expect(await inbox.complete(done!)).toBe(true)
      expect(await inbox.retry(failed!, 60_000, 'Error: once')).toBe(true)
      expect(await inbox.bury(buried!, 'Error: gave up')).toBe(true)
      expect(await inbox.complete(failed!)).toBe(false)
      expect(await inbox.stats()).toMatchObject({ depth: 1, retrying: 1, dead: 1 })
      expect((await inbox.dead()).map((letter) => [letter.id, letter.attempts, letter.takes])).toEqual([[buried!.id, 1, 1]])
    })

    it('kill -9 of the postmaster and every backend: the same inbox object answers unavailable while it is down, and again once it is back', async () => {
      const inbox = new PostgresInbox({ pool: bare, table: 'crash', timeoutMs: 500 })
      await inbox.ensureTable()
      const before = inboxDelivery()
      expect(await inbox.append(before)).toBe('accepted')
      await durable.crash()
      const during = inboxDelivery()
      try {
        await expect(inbox.append(during)).rejects.toMatchObject({ name: 'InboxError', kind: 'unavailable' })
      } finally {
        await durable.start()
      }
      expect(await eventually(async () => (await inbox.append(during).catch(() => 'down')) !== 'down')).toBe(true)
      const ids = (await inbox.take(10, 60_000)).map((entry) => entry.id)
      expect(ids.sort()).toEqual([before.id, during.id].sort())
    })
  })
})
