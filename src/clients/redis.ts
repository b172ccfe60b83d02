/**
 * The Redis clients the package takes, `ioredis` and `node-redis` (v4+), adapted to one call:
 * run a Lua script with one declared key. Neither library is a dependency: a client is
 * recognised by its methods. Shared by RedisStore and RedisInbox; not a public entry.
 */

/** The part of an `ioredis` client (`Redis` or `Cluster`) the store and the inbox use. */
export interface IORedisLikeClient {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
}

/** The part of a `node-redis` v4+ client (`createClient()` or `createCluster()`) the store and the inbox use. */
export interface NodeRedisLikeClient {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
}

/** Runs one Lua script with one declared key. */
export type Run = (script: string, key: string, args: string[]) => Promise<unknown>

/**
 * Adapts an ioredis or node-redis client to {@link Run}; `what` names the class in the error.
 * Internal: shared by RedisStore and RedisInbox.
 *
 * @example
 * const run = adapt(client, 'RedisInbox')
 */
export function adapt(client: unknown, what = 'RedisStore'): Run {
  const c = client as Partial<IORedisLikeClient> | null
  if (typeof c !== 'object' || c === null || typeof c.eval !== 'function') {
    throw new TypeError(`svc-webhooks: ${what} needs \`client\`: an ioredis client (new Redis(url)) or a connected node-redis v4+ client (await createClient({ url }).connect()).`)
  }
  // ioredis: eval(script, numKeys, ...keysAndArgs); node-redis: eval(script, { keys, arguments }).
  // Only ioredis has defineCommand, which tells the two apart without importing either.
  if (typeof c.defineCommand === 'function') {
    const io = c as IORedisLikeClient
    return (script, key, args) => io.eval(script, 1, key, ...args)
  }
  const node = c as unknown as NodeRedisLikeClient
  return (script, key, args) => node.eval(script, { keys: [key], arguments: args })
}


/** Server error codes that repeating the same command will not fix. */
const REFUSALS = new Set(['OOM', 'WRONGTYPE', 'ERR', 'NOPERM', 'NOAUTH', 'WRONGPASS', 'EXECABORT', 'CROSSSLOT'])

/**
 * Whether `error` is an error reply from Redis that repeating will not fix: out of memory under
 * `noeviction`, a key of the wrong type, a script error, a missing permission, keys in several
 * cluster slots (a prefix without a hash tag). A connection error,
 * a timeout, and the replies of a server that is starting, failing over or busy (`LOADING`,
 * `READONLY`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, `BUSY`, `NOSCRIPT`, `ERR max number of
 * clients reached`) are not: they pass. Reply errors are recognised by their code, the first word
 * of the message in capitals (ioredis names them `ReplyError`, node-redis `SimpleError`).
 *
 * @example
 * withDeadline('RedisInbox.append', 2000, attempt, { refused: isRedisRefusal })
 */
export function isRedisRefusal(error: unknown): boolean {
  if (!(error instanceof Error) || typeof error.message !== 'string') return false
  const code = /^([A-Z][A-Z_-]+) /.exec(error.message)?.[1]
  if (code === undefined || !REFUSALS.has(code)) return false
  return !(code === 'ERR' && /max number of clients/i.test(error.message))
}
