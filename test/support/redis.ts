/**
 * A private redis-server (tools/redis.mjs) and an ioredis client to it for one describe block:
 * started before its tests, stopped after them. Call inside `describeWithRedis`.
 *
 * @example
 * describeWithRedis('RedisInbox', () => {
 *   const redis = useRedisServer()
 *   it('...', async () => { const inbox = new RedisInbox({ client: redis.client }) })
 * })
 */
import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { startRedisServer, type RedisServer } from '../../tools/redis.mjs'

export interface RedisUnderTest {
  readonly server: RedisServer
  readonly client: Redis
}

export function useRedisServer(): RedisUnderTest {
  const state = {} as { server: RedisServer; client: Redis }
  beforeAll(async () => {
    state.server = await startRedisServer()
    state.client = new Redis(state.server.url)
    // A server stopped under a test is reported by the test's own calls, not as an unhandled error.
    state.client.on('error', () => {})
  })
  afterAll(async () => {
    state.client?.disconnect()
    await state.server?.stop()
  })
  return state
}
