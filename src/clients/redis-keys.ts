/**
 * What makes a Redis key layout safe on Redis Cluster, in one place: the hash tag Redis hashes a
 * key by, the check that a prefix carries one, and which client objects talk to a Cluster. An
 * engine whose one operation touches several keys (RedisInbox's scripts, a BullMQ queue) puts a
 * tag in its prefix, so every key it builds lands in the prefix's slot by construction and a
 * script never meets "CROSSSLOT" or "non local key" at its first delivery. Shared by the Redis
 * engines; not a public entry.
 */

/**
 * The hash tag Redis Cluster hashes `key` by: the text between the first `{` and the first `}`
 * after it, when that is not empty (the cluster specification's "hash tags"); undefined when the
 * whole key is hashed.
 *
 * @example
 * hashTagOf('{svc-webhooks:inbox}:due') // 'svc-webhooks:inbox'
 * hashTagOf('svc-webhooks:inbox:due')   // undefined
 */
export function hashTagOf(key: string): string | undefined {
  const open = key.indexOf('{')
  if (open < 0) return undefined
  const close = key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : undefined
}

/**
 * Checks at construction that `prefix` fixes the slot of every key built from it: it must hold a
 * hash tag, and nothing after the prefix may change which one Redis reads. Throws a TypeError
 * that says why and what to write instead; never rewrites the prefix (that would move the keys
 * a running deployment already holds).
 *
 * @example
 * requireHashTag('{myapp:inbox}:', 'RedisInbox `prefix`') // ok
 * requireHashTag('myapp:inbox:', 'RedisInbox `prefix`')   // throws: "... use '{myapp:inbox}:' ..."
 */
export function requireHashTag(prefix: string, what: string, suggestion?: string): void {
  if (hashTagOf(prefix) !== undefined) return
  const bare = prefix.replace(/[{}]/g, '').replace(/:+$/, '') || 'svc-webhooks'
  suggestion ??= `{${bare}}:`
  throw new TypeError(
    `svc-webhooks: ${what} "${prefix}" has no hash tag ({...}). One operation touches several keys, and on Redis Cluster ` +
      `they must share a slot, which only a hash tag in the prefix guarantees (without one a delivery fails with "CROSSSLOT" ` +
      `or "non local key", and a script cut short between two keys can leave a half-written delivery). Use '${suggestion}'. ` +
      'Moving from a prefix without one: see docs/topologies.md "Redis Cluster".',
  )
}

/** What kind of Redis client an object is, by its methods (neither library is imported). */
export type RedisClientKind = 'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster'

/**
 * Tells the supported client objects apart: ioredis `Redis` and `Cluster` (`isCluster`),
 * node-redis `createClient()` and `createCluster()` (`getSlotMaster`). Undefined for anything
 * else, which the engines refuse at construction.
 *
 * @example
 * if (redisClientKind(client) === undefined) throw new TypeError('...')
 */
export function redisClientKind(client: unknown): RedisClientKind | undefined {
  const c = client as Record<string, unknown> | null
  if (typeof c !== 'object' || c === null || typeof c.eval !== 'function') return undefined
  // Only ioredis has defineCommand; only its Cluster says isCluster.
  if (typeof c.defineCommand === 'function') return c.isCluster === true ? 'ioredis-cluster' : 'ioredis'
  return typeof c.getSlotMaster === 'function' ? 'node-redis-cluster' : 'node-redis'
}

/**
 * Whether `client` talks to a Redis Cluster.
 *
 * @example
 * if (isRedisCluster(queue.opts.connection)) requireHashTag(queue.opts.prefix, 'the BullMQ queue prefix')
 */
export function isRedisCluster(client: unknown): boolean {
  const kind = redisClientKind(client)
  return kind === 'ioredis-cluster' || kind === 'node-redis-cluster'
}
