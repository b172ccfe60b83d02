/**
 * Real redis-server for the RedisStore suites: a mock cannot show what a crash, a restart or a
 * frozen server does to claims in flight. Started per suite on a free port of 127.0.0.1 with no
 * persistence, stoppable and restartable for fault tests (redis-process.mjs). Where redis-server
 * is missing the suites say so and skip; under CI=true they fail instead of skipping.
 */
import { describeWithService } from './services.js'
import { findRedisServer, startRedisServer, type RedisServer } from './redis-process.mjs'

export { startRedisServer, type RedisServer }

const bin = findRedisServer()

/** Why the Redis suites cannot run here, or undefined when redis-server is installed. */
export const redisSkipReason = bin
  ? undefined
  : 'redis-server is not installed (apt-get install -y redis-server, or set REDIS_SERVER_BIN)'

/**
 * `describe` that runs only where redis-server exists: elsewhere it warns and skips, except
 * under CI=true, where a missing server is a failure.
 *
 * @example
 * describeWithRedis('RedisStore', () => { ... })
 */
export function describeWithRedis(name: string, body: () => void): void {
  describeWithService(name, 'redis-server', redisSkipReason, body)
}
