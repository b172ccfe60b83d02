// @ts-check
// Connections the soak's processes open from their environment: a Redis client (ioredis or
// node-redis, both quiet while the server restarts), a pg Pool, and the durable inbox on either
// engine (RedisInbox, PostgresInbox from the built package).
import { RedisInbox } from 'svc-webhooks/redis'
import { PostgresInbox } from 'svc-webhooks/postgres'

/**
 * A connected Redis client of the given kind and how to close it.
 *
 * @param {string} url
 * @param {string} [kind] 'ioredis' (default) or 'node-redis'
 * @returns {Promise<{ client: any, close: () => void }>}
 */
export async function connectRedis(url, kind = 'ioredis') {
  if (kind === 'node-redis') {
    const { createClient } = await import('redis')
    const client = createClient({ url })
    client.on('error', () => {}) // reconnects during the restart are expected
    await client.connect()
    return { client, close: () => client.destroy() }
  }
  const { Redis } = await import('ioredis')
  const client = new Redis(url)
  client.on('error', () => {})
  return { client, close: () => client.disconnect() }
}

/**
 * A pg Pool that does not crash the process when an idle connection drops.
 *
 * @param {string} url
 * @param {number} [max]
 */
export async function connectPostgres(url, max = 10) {
  const { default: pg } = await import('pg')
  const pool = new pg.Pool({ connectionString: url, max })
  pool.on('error', () => {})
  return pool
}

/**
 * The inbox on `engine`, and how to close its connection; with `ordering`, an inbox that files
 * each delivery under its key at append; `connections`: the Postgres pool's size (default 10).
 *
 * @param {{ engine: string, url: string, client?: string, ordering?: import('svc-webhooks').OrderingOption, connections?: number }} options
 * @returns {Promise<{ inbox: import('svc-webhooks').WebhookInbox, close: () => Promise<void> }>}
 * @example
 * const { inbox, close } = await openInbox({ engine: 'redis', url: 'redis://127.0.0.1:6379', client: 'node-redis' })
 */
export async function openInbox({ engine, url, client = 'ioredis', ordering, connections }) {
  if (engine === 'postgres') {
    const pool = await connectPostgres(url, connections)
    return { inbox: new PostgresInbox({ pool, ...(ordering && { ordering }) }), close: () => pool.end() }
  }
  if (engine !== 'redis') throw new Error(`unknown inbox engine "${engine}" (redis or postgres)`)
  const redis = await connectRedis(url, client)
  return { inbox: new RedisInbox({ client: redis.client, ...(ordering && { ordering }) }), close: async () => redis.close() }
}
