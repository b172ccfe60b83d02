/**
 * `svc-webhooks/redis`, for receivers running in more than one process or machine: `RedisStore`,
 * the idempotency store (src/stores/redis.ts), `RedisInbox`, the durable inbox
 * (src/inbox/redis.ts), and `RedisSecretSource`, the endpoint's secrets shared by every process
 * (src/stores/redis-secret-source.ts). All work with an `ioredis` or a `node-redis` (v4+) client;
 * neither is a dependency: the client is adapted by its methods (src/clients/redis.ts).
 */
export { RedisStore, type RedisStoreOptions } from '../stores/redis.js'
export type { IORedisLikeClient, NodeRedisLikeClient } from '../clients/redis.js'
export { RedisInbox, type RedisInboxOptions } from '../inbox/redis.js'
export { RedisSecretSource, type RedisSecretSourceOptions } from '../stores/redis-secret-source.js'
export { moveRedisInboxPrefix, type MoveRedisInboxPrefixOptions } from '../inbox/redis-move.js'
