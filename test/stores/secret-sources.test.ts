/**
 * The secret sources against what they store in: RedisSecretSource through ioredis and node-redis
 * on a real redis-server, PostgresSecretSource on a real Postgres (its table created on first
 * use), FileSecretSource on a temp dir (change detection, atomic write, plain-text files), and a
 * receiver reading each through a rotation. Under CI=true a missing server fails instead of skipping.
 */
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync, utimesSync, renameSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createClient } from 'redis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookReceiver, type SecretSource } from 'svc-webhooks'
import { PostgresSecretSource, createSecretTableSql, migrateSecretTableSql } from 'svc-webhooks/postgres'
import { RedisSecretSource } from 'svc-webhooks/redis'
import { FileSecretSource } from 'svc-webhooks/service'
import { sampleEvent, signWebhook } from 'svc-webhooks/testing'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

const OLD = 'svc_whsec_SourcesOldSecret0000000000'
const NEW = 'svc_whsec_SourcesNewSecret1111111111'

/**
 * A receiver on `source` taken through a rotation the way rotateEndpointSecret writes it:
 * pending (a new-secret delivery is 503 secret_pending), [new, old] (both verify), [new].
 */
async function rotateThrough(source: SecretSource & { write: NonNullable<SecretSource['write']> }) {
  const lines: string[] = []
  const runs: string[] = []
  const receiver = createWebhookReceiver({
    secret: source,
    secretRereadMs: 10,
    // Short, so the pending step is answered 503 here; holding a pending mismatch has its own tests.
    pendingHoldMs: 30,
    log: (line) => lines.push(line),
    on: { 'message.received': (_e, d) => void runs.push(d.id) },
  })
  const send = async (secret: string, id = randomUUID()) => {
    const signed = await signWebhook({ secret, event: sampleEvent('message.received'), id })
    const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    return `${answer.status} ${(JSON.parse(answer.body) as { code?: string }).code ?? 'ok'}`
  }
  await source.write({ secrets: [OLD] })
  const early = randomUUID()
  const steps = [await send(OLD)]
  await source.write({ secrets: [OLD], pending: [{ id: randomUUID(), owner: 'test', forMs: 60_000 }] })
  steps.push(await send(NEW, early))
  await source.write({ secrets: [NEW, OLD] })
  steps.push(await send(NEW, early), await send(OLD))
  await source.write({ secrets: [NEW] })
  steps.push(await send(NEW))
  expect(steps).toEqual(['200 ok', '503 secret_pending', '200 ok', '200 ok', '200 ok'])
  expect(runs.filter((id) => id === early)).toHaveLength(1)
  return lines
}

/**
 * The conditional write every source makes (docs/secret-sources.md): a write on a stale version
 * changes nothing and says so; ten writers racing read → write-if-unchanged (again on a conflict)
 * each land their change, none lost.
 */
async function conditionalWrites(source: SecretSource & { write: NonNullable<SecretSource['write']> }) {
  await source.write({ secrets: [OLD] })
  const first = await source.read()
  expect(first.version).toBeGreaterThan(0)
  expect(await source.write({ secrets: [NEW, OLD] }, { version: first.version! })).toBe(true)
  expect(await source.write({ secrets: ['svc_whsec_SourcesStaleWrite000000'] }, { version: first.version! })).toBe(false)
  expect((await source.read()).secrets).toEqual([NEW, OLD])
  const writers = Array.from({ length: 10 }, async (_, i) => {
    for (let round = 0; round < 500; round++) {
      const state = await source.read()
      if (await source.write({ secrets: [...state.secrets, `svc_whsec_SourcesWriter${i}`] }, { version: state.version ?? 0 })) return round
    }
    throw new Error(`writer ${i} never wrote`)
  })
  const rounds = await Promise.all(writers)
  const final = (await source.read()).secrets
  expect(final).toHaveLength(12)
  for (let i = 0; i < 10; i++) expect(final).toContain(`svc_whsec_SourcesWriter${i}`)
  return rounds.reduce((a, b) => a + b, 0)
}

describeWithRedis('RedisSecretSource', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  const clients = {
    ioredis: async () => {
      const client = new Redis(server.url, { lazyConnect: true })
      client.on('error', () => {})
      await client.connect()
      return { client, get: (key: string) => client.get(key), set: (key: string, value: string) => client.set(key, value), close: async () => void client.disconnect() }
    },
    'node-redis': async () => {
      const client = createClient({ url: server.url })
      client.on('error', () => {})
      await client.connect()
      return { client, get: (key: string) => client.get(key), set: (key: string, value: string) => client.set(key, value), close: async () => void client.destroy() }
    },
  }

  for (const [name, connect] of Object.entries(clients)) {
    describe(`over ${name}`, () => {
      let conn: Awaited<ReturnType<(typeof clients)['ioredis']>>
      beforeAll(async () => {
        conn = (await connect()) as typeof conn
      })
      afterAll(async () => {
        await conn?.close()
      })

      it('writes the state as JSON in its key and reads it back', async () => {
        const key = `secrets:${name}:${randomUUID()}`
        const source = new RedisSecretSource({ client: conn.client, key })
        await source.write({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
        // The version first, so the write script reads it without a JSON parser.
        expect(await conn.get(key)).toMatch(/^\{"version":1,/)
        expect(JSON.parse((await conn.get(key))!)).toEqual({ version: 1, secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
        expect(await source.read()).toEqual({ version: 1, secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
        await conn.set(key, JSON.stringify({ secrets: [OLD] }))
        expect(await source.read()).toEqual({ secrets: [OLD] })
      })

      it('a missing key is a read error that names the key; a write of an unusable state throws without quoting it', async () => {
        const key = `secrets:${name}:missing`
        await expect(new RedisSecretSource({ client: conn.client, key }).read()).rejects.toMatchObject({
          name: 'SecretSourceError',
          message: expect.stringContaining(`the key "${key}" does not exist`),
          missing: true,
        })
        const source = new RedisSecretSource({ client: conn.client, key })
        const error = await Promise.resolve(source.write({ secrets: [` ${OLD}`] })).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(TypeError)
        expect(String(error)).not.toContain(OLD)
        await expect(source.write({ secrets: [] })).rejects.toThrow(/no secret and no pending mark/)
        expect(await conn.get(key)).toBeNull()
      })

      it('a receiver reads it through a rotation with no 401', async () => {
        await rotateThrough(new RedisSecretSource({ client: conn.client, key: `secrets:${name}:${randomUUID()}` }))
      })

      it('writes conditionally: a stale version changes nothing, racing writers lose nothing', async () => {
        const key = `secrets:${name}:${randomUUID()}`
        const lost = await conditionalWrites(new RedisSecretSource({ client: conn.client, key }))
        console.log(`RedisSecretSource over ${name}: 10 racing writers, ${lost} rounds lost to a conflict and read again`)
        // A state stored by an earlier version (no version in it) is version 0.
        await conn.set(key, JSON.stringify({ secrets: [OLD] }))
        const source = new RedisSecretSource({ client: conn.client, key })
        expect(await source.write({ secrets: [NEW] }, { version: 1 })).toBe(false)
        expect(await source.write({ secrets: [NEW] }, { version: 0 })).toBe(true)
        expect(await source.read()).toEqual({ version: 1, secrets: [NEW] })
      })

      it('a value that is not a state: 503, and the log line never quotes it', async () => {
        const key = `secrets:${name}:${randomUUID()}`
        await conn.set(key, 'svc_whsec_RedisGarbageMarker')
        const lines: string[] = []
        const receiver = createWebhookReceiver({ secret: new RedisSecretSource({ client: conn.client, key }), log: (l) => lines.push(l), on: {} })
        const signed = await signWebhook({ secret: OLD, event: sampleEvent('message.received') })
        const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
        expect([answer.status, answer.body]).toEqual([503, '{"ok":false,"code":"secret_lookup_failed"}'])
        expect(lines.join('\n')).toMatch(/unusable value/)
        expect(lines.join('\n')).not.toContain('RedisGarbageMarker')
      })
    })
  }

  it('rejects a client or key it cannot use when created', () => {
    expect(() => new RedisSecretSource({ client: {} as never, key: 'k' })).toThrow(/needs `client`/)
    expect(() => new RedisSecretSource({ client: new Redis({ lazyConnect: true }), key: '' })).toThrow(/`key`/)
  })

  it('a server that is down: the read fails within its timeout, and the receiver answers 503', async () => {
    const down = new Redis(`redis://127.0.0.1:1`, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false })
    down.on('error', () => {})
    const source = new RedisSecretSource({ client: down, key: 'k', timeoutMs: 200 })
    await expect(source.read()).rejects.toMatchObject({ name: 'SecretSourceError', message: expect.stringMatching(/RedisSecretSource\.read got no answer within 200 ms/) })
    const lines: string[] = []
    const receiver = createWebhookReceiver({ secret: source, log: (l) => lines.push(l), on: {} })
    const signed = await signWebhook({ secret: OLD, event: sampleEvent('message.received') })
    const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    expect(answer.status).toBe(503)
    expect(lines.join('\n')).toMatch(/Reading the secret source failed: RedisSecretSource\.read got no answer/)
    down.disconnect()
  })
})

describeWithPostgres('PostgresSecretSource', () => {
  let server: PostgresServer
  let pool: pg.Pool
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 10 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  it('creates its table on first use, upserts the state, and reads it back', async () => {
    const source = new PostgresSecretSource({ pool, name: 'ep_1' })
    await source.write({ secrets: [OLD] })
    await source.write({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
    const { rows } = await pool.query('SELECT name, state, updated_at FROM svc_webhooks_secrets')
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ name: 'ep_1', updated_at: expect.any(Date) })
    expect(JSON.parse(rows[0].state as string)).toEqual({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
    expect(await source.read()).toEqual({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000, version: 2 })
    // Another process's source sees the same row.
    expect(await new PostgresSecretSource({ pool, name: 'ep_1' }).read()).toEqual({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000, version: 2 })
  })

  it('many sources creating the table at once all succeed; createTable: false leaves it to migrations', async () => {
    // Sixteen at once, on twenty fresh tables: the loser of the race meets a unique violation,
    // "relation already exists" or "type already exists" by when the winner's catalog rows
    // became visible to it, and each of the three must count as created (8 sources on one table
    // met the last of them only now and then: in one CI run of two, under Node 24).
    for (let t = 0; t < 20; t++) {
      const sources = Array.from({ length: 16 }, (_, i) => new PostgresSecretSource({ pool, name: `ep_${i}`, table: `racing_secrets_${t}` }))
      await Promise.all(sources.map((s, i) => s.write({ secrets: [`svc_whsec_racing_${i}`] })))
      expect(await sources[15]!.read()).toEqual({ secrets: ['svc_whsec_racing_15'], version: 1 })
    }
    const unmade = new PostgresSecretSource({ pool, name: 'ep', table: 'migrated_secrets', createTable: false, timeoutMs: 300 })
    await expect(unmade.read()).rejects.toMatchObject({ name: 'SecretSourceError', message: expect.stringMatching(/refused by the server: .*does not exist/) })
    await pool.query(createSecretTableSql('migrated_secrets'))
    await unmade.write({ secrets: [OLD] })
    expect(await unmade.read()).toEqual({ secrets: [OLD], version: 1 })
  })

  it('a missing row is a read error that names it', async () => {
    await expect(new PostgresSecretSource({ pool, name: 'nobody' }).read()).rejects.toMatchObject({
      name: 'SecretSourceError',
      message: expect.stringContaining('no row named "nobody"'),
      missing: true,
    })
  })

  it('a receiver reads it through a rotation with no 401', async () => {
    await rotateThrough(new PostgresSecretSource({ pool, name: `ep_${randomUUID()}` }))
  })

  it('writes conditionally (UPDATE ... WHERE version = $n): a stale version changes nothing, racing writers lose nothing', async () => {
    const lost = await conditionalWrites(new PostgresSecretSource({ pool, name: `ep_${randomUUID()}` }))
    console.log(`PostgresSecretSource: 10 racing writers, ${lost} rounds lost to a conflict and read again`)
  })

  it('adds the version column to a table made by an earlier version; a row stored then is version 0', async () => {
    await pool.query('CREATE TABLE old_secrets (name text PRIMARY KEY, state text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())')
    await pool.query("INSERT INTO old_secrets (name, state) VALUES ('ep', $1)", [JSON.stringify({ secrets: [OLD] })])
    const source = new PostgresSecretSource({ pool, name: 'ep', table: 'old_secrets' })
    expect(await source.read()).toEqual({ secrets: [OLD], version: 0 })
    expect(await source.write({ secrets: [NEW, OLD] }, { version: 0 })).toBe(true)
    expect(await source.write({ secrets: [NEW] }, { version: 0 })).toBe(false)
    expect(await source.read()).toEqual({ secrets: [NEW, OLD], version: 1 })
  })

  it('migrateSecretTableSql adds the version column for migrations that own the table (createTable: false)', async () => {
    await pool.query('CREATE TABLE owned_old_secrets (name text PRIMARY KEY, state text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())')
    await pool.query("INSERT INTO owned_old_secrets (name, state) VALUES ('ep', $1)", [JSON.stringify({ secrets: [OLD] })])
    const source = new PostgresSecretSource({ pool, name: 'ep', table: 'owned_old_secrets', createTable: false, timeoutMs: 300 })
    await expect(source.read()).rejects.toMatchObject({ name: 'SecretSourceError' })
    await pool.query(migrateSecretTableSql('owned_old_secrets'))
    // Twice, as a migration run again does: IF NOT EXISTS.
    await pool.query(migrateSecretTableSql('owned_old_secrets'))
    expect(await source.read()).toEqual({ secrets: [OLD], version: 0 })
    expect(await source.write({ secrets: [NEW, OLD] }, { version: 0 })).toBe(true)
  })

  it('rejects options it cannot use when created', () => {
    expect(() => new PostgresSecretSource({ name: 'x' } as never)).toThrow(/needs `pool`/)
    expect(() => new PostgresSecretSource({ client: pool as never, name: 'x' } as never)).toThrow(/not `client`: a pg.Client does not reconnect/)
    expect(() => new PostgresSecretSource({ pool, name: '' })).toThrow(/`name`/)
    expect(() => new PostgresSecretSource({ pool, name: 'x', table: 'a; DROP TABLE b' })).toThrow(/`table`/)
  })
})

describe('FileSecretSource', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-file-source-'))
  })
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true })
  })

  it('reads JSON or one secret per line, and again only when the file changed', async () => {
    const path = join(dir, 'plain')
    writeFileSync(path, `${NEW}\r\n\n  ${OLD}  \n`)
    utimesSync(path, 1_700_000_000, 1_700_000_000)
    const source = new FileSecretSource({ path })
    expect(await source.read()).toEqual({ secrets: [NEW, OLD] })
    // Same metadata: the state read before, even if the bytes changed behind its back.
    writeFileSync(path, `${OLD}\r\n\n  ${NEW}  \n`)
    utimesSync(path, 1_700_000_000, 1_700_000_000)
    expect(await source.read()).toEqual({ secrets: [NEW, OLD] })
    // A change in place (new mtime): read again.
    writeFileSync(path, JSON.stringify({ secrets: [OLD], pendingUntil: 1_800_000_000_000 }))
    expect(await source.read()).toEqual({ secrets: [OLD], pendingUntil: 1_800_000_000_000 })
  })

  it('follows a Kubernetes-style update: the mounted file is a symlink swapped to a new target', async () => {
    const mount = join(dir, 'mount')
    mkdirSync(join(mount, 'v1'), { recursive: true })
    mkdirSync(join(mount, 'v2'), { recursive: true })
    writeFileSync(join(mount, 'v1', 'secret'), OLD)
    writeFileSync(join(mount, 'v2', 'secret'), NEW)
    symlinkSync('v1', join(mount, '..data'))
    symlinkSync('..data/secret', join(mount, 'secret'))
    const source = new FileSecretSource({ path: join(mount, 'secret') })
    expect(await source.read()).toEqual({ secrets: [OLD] })
    symlinkSync('v2', join(mount, '..data_tmp'))
    renameSync(join(mount, '..data_tmp'), join(mount, '..data'))
    expect(await source.read()).toEqual({ secrets: [NEW] })
  })

  it('writes JSON atomically, mode 0600, leaving no temporary file', async () => {
    const path = join(dir, 'written.json')
    const source = new FileSecretSource({ path })
    await source.write({ secrets: [OLD] })
    expect(await source.read()).toEqual({ version: 1, secrets: [OLD] })
    const before = statSync(path).ino
    await source.write({ secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
    expect(statSync(path).ino).not.toBe(before) // renamed over, never rewritten in place
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(await new FileSecretSource({ path }).read()).toEqual({ version: 2, secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
    expect(await source.read()).toEqual({ version: 2, secrets: [NEW, OLD], pendingUntil: 1_800_000_000_000 })
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([])
    await expect(new FileSecretSource({ path: join(dir, 'no-such-dir', 'x') }).write({ secrets: [OLD] })).rejects.toMatchObject({ name: 'SecretSourceError' })
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([])
  })

  it('a missing file is a read error that names it; a broken JSON file is refused 503 without being quoted', async () => {
    await expect(new FileSecretSource({ path: join(dir, 'absent') }).read()).rejects.toMatchObject({ name: 'SecretSourceError', message: expect.stringContaining('(ENOENT)'), missing: true })
    const path = join(dir, 'broken.json')
    writeFileSync(path, '{ "secrets": ["svc_whsec_FileGarbageMarker" ')
    const lines: string[] = []
    const receiver = createWebhookReceiver({ secret: new FileSecretSource({ path }), log: (l) => lines.push(l), on: {} })
    const signed = await signWebhook({ secret: OLD, event: sampleEvent('message.received') })
    const answer = await receiver.handle({ method: 'POST', body: signed.rawBody, headers: signed.headers })
    expect(answer.status).toBe(503)
    expect(lines.join('\n')).toMatch(/unusable value/)
    expect(lines.join('\n')).not.toContain('FileGarbageMarker')
  })

  it('a receiver reads it through a rotation with no 401', async () => {
    await rotateThrough(new FileSecretSource({ path: join(dir, 'rotated.json') }))
  })

  it('writes conditionally under a lock file: a stale version changes nothing, racing writers lose nothing', async () => {
    const path = join(dir, 'conditional.json')
    // Two objects on one file, as two processes have: each reads and writes on its own.
    const sources = [new FileSecretSource({ path }), new FileSecretSource({ path })]
    let next = 0
    const either: SecretSource & { write: NonNullable<SecretSource['write']> } = {
      read: () => sources[next++ % 2]!.read(),
      write: (state, condition) => sources[next++ % 2]!.write(state, condition),
    }
    await conditionalWrites(either)
    expect(readdirSync(dir).filter((file) => file.startsWith('conditional.json.'))).toEqual([])
  })
})
