/**
 * The inbox worker's fault suite (worker-faults.ts) over a real redis-server and a real Postgres,
 * and what only a real server shows: Postgres restarted right after a handler succeeded, the
 * complete retried across the restart so the handler runs once.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { PostgresInbox } from 'svc-webhooks/postgres'
import { RedisInbox } from 'svc-webhooks/redis'
import { describeWithPostgres, describeWithRedis } from '../support/services.js'
import { startPostgresServer, type PostgresServer } from '../../tools/postgres.mjs'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'
import { describeWorkerFaults, testWorker, textDelivery, until } from './worker-faults.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describeWithRedis('inbox worker over RedisInbox', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await startRedisServer()
    client = new Redis(server.url)
    client.on('error', () => {})
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })
  describeWorkerFaults('RedisInbox', async () => new RedisInbox({ client, prefix: `worker-${randomUUID()}:` }))
})

describeWithPostgres('inbox worker over PostgresInbox', () => {
  let server: PostgresServer
  let pool: pg.Pool
  let tables = 0
  async function freshInbox() {
    const inbox = new PostgresInbox({ pool, table: `worker_inbox_${++tables}` })
    await inbox.ensureTable()
    return inbox
  }
  beforeAll(async () => {
    server = await startPostgresServer()
    pool = new pg.Pool({ connectionString: server.url, max: 10 })
    pool.on('error', () => {})
  })
  afterAll(async () => {
    await pool?.end()
    await server?.stop()
  })

  describeWorkerFaults('PostgresInbox', freshInbox)

  it('Postgres restarted right after a handler succeeded: the complete is retried across the restart, the handler runs once', { timeout: 60_000 }, async () => {
    const inbox = await freshInbox()
    const d = textDelivery('restart during the ack')
    await inbox.append(d)
    let restarted: Promise<void> | undefined
    const visibilityTimeoutMs = 8000
    const { worker, runs, results } = testWorker(
      inbox,
      async () => {
        if (restarted) return
        // The handler's work is done; the database goes down before the worker records it, for 3 s.
        await server.kill()
        restarted = sleep(3000).then(() => server.start())
      },
      { visibilityTimeoutMs },
    )
    const takenBy = Date.now()
    worker.start()
    await until(() => results.length >= 1, 30_000)
    await restarted
    // Past the lease: a delivery whose complete was given up would be taken and run again by now.
    await sleep(Math.max(0, takenBy + visibilityTimeoutMs + 1500 - Date.now()))
    await worker.stop()
    expect(results.map((r) => r.outcome)).toEqual(['processed'])
    expect(runs).toEqual([d.id])
    expect((await inbox.stats()).depth).toBe(0)
  })
})
