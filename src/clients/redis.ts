/**
 * The Redis clients the package takes, `ioredis` and `node-redis` (v4+), adapted to one call:
 * run a Lua script with one declared key. Neither library is a dependency: a client is
 * recognised by its methods. Shared by RedisStore and RedisInbox; not a public entry.
 */
import { unchecked, withDeadline } from './deadline.js'

/** The part of an `ioredis` client (`Redis` or `Cluster`) the store and the inbox use. */
export interface IORedisLikeClient {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void
  /** Used when present: a script the server holds is run by its SHA-1, not sent again. */
  evalsha?(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
}

/** The part of a `node-redis` v4+ client (`createClient()` or `createCluster()`) the store and the inbox use. */
export interface NodeRedisLikeClient {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
  /** Used when present, as `evalsha` on ioredis. */
  evalSha?(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
}

/** Runs one Lua script with one declared key. */
export type Run = (script: string, key: string, args: string[]) => Promise<unknown>

/**
 * What "written" means for a store or inbox asked to wait for replicas: every script is followed,
 * on the same connection, by a fence write to `fenceKey` and `WAIT replicas`, and counts as done
 * only once `replicas` replicas acknowledged. The fence makes the WAIT cover what the script only
 * read (a `completed` or `duplicate` verdict rests on a record another request wrote): WAIT waits
 * for this connection's last write, and the replication stream is in order, so a replica that has
 * the fence has every write the primary made before it.
 */
export interface Replication {
  /** Replicas that must acknowledge; 0 turns the wait off. */
  replicas: number
  /** The key the fence write increments. */
  fenceKey: string
}

/** How long one WAIT waits for the replicas before the attempt counts as not replicated and is tried again. */
const WAIT_MS = 500
/** The fence: one small write on the connection, so the WAIT after it covers everything before it. */
const FENCE = `return redis.call('INCR', KEYS[1])`
/** At most one forced trip to Sentinel per client in this long. */
const REDISCOVER_MS = 300

/**
 * The rejection of an attempt whose write did not reach enough replicas in time. It is not a
 * refusal (the deadline retries it): a replica lagging, or a primary cut off from its replicas
 * that Sentinel is about to replace. `reply` is what the script answered, for a caller that must
 * undo what it took.
 */
export class NotReplicatedError extends Error {
  constructor(readonly acknowledged: number, readonly wanted: number, readonly reply: unknown) {
    super(`NOTREPLICATED the write reached ${acknowledged} of the ${wanted} replicas asked for within ${WAIT_MS} ms`)
    this.name = 'NotReplicatedError'
  }
}

/** Checks the `replicas` option of `what` and the client shape it needs; throws a TypeError naming the problem. */
export function replicasOption(replicas: unknown, client: unknown, what: string): number {
  if (replicas === undefined || replicas === 0) return 0
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > 16) {
    throw new TypeError(`svc-webhooks: ${what} \`replicas\` must be a whole number of replicas from 0 to 16 (the WAIT each write makes).`)
  }
  const c = (client ?? {}) as { isCluster?: unknown; masters?: unknown; call?: unknown; sendCommand?: unknown; defineCommand?: unknown }
  if (c.isCluster === true || Array.isArray(c.masters)) {
    throw new TypeError(
      `svc-webhooks: ${what} \`replicas\` needs a client of one primary (a plain or Sentinel client): on Redis Cluster a WAIT reaches one node, not the one each key lives on. Leave \`replicas\` out on a Cluster client.`,
    )
  }
  if (typeof c.defineCommand === 'function' ? typeof c.call !== 'function' : typeof c.sendCommand !== 'function') {
    throw new TypeError(`svc-webhooks: ${what} \`replicas\` needs an ioredis client with call() or a node-redis client with sendCommand(), to send WAIT.`)
  }
  return replicas
}

/**
 * Each script's SHA-1 (hex) once WebCrypto has computed it, for EVALSHA: EVAL sends the whole
 * text on every call and the server hashes it each time, and the ordered take's script is over
 * 7 KB. Until its digest is ready (the first calls), or without WebCrypto, a script goes by EVAL.
 * Bounded: the scripts are a few dozen constants; past that, nothing more is kept.
 */
const digests = new Map<string, string | Promise<void>>()

function shaOf(script: string): string | undefined {
  const known = digests.get(script)
  if (typeof known === 'string') return known
  if (known === undefined && digests.size < 256 && typeof globalThis.crypto?.subtle?.digest === 'function') {
    const computing = globalThis.crypto.subtle.digest('SHA-1', new TextEncoder().encode(script)).then(
      (digest) => void digests.set(script, Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('')),
      () => undefined,
    )
    digests.set(script, computing)
  }
  return undefined
}

/** The server does not hold the script (restarted, failed over, another Cluster node): nothing ran. */
const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith('NOSCRIPT')

/**
 * Adapts an ioredis or node-redis client to {@link Run}; `what` names the class in the error.
 * Internal: shared by RedisStore and RedisInbox.
 *
 * @example
 * const run = adapt(client, 'RedisInbox')
 */
export function adapt(client: unknown, what = 'RedisStore', replication?: Replication): Run {
  const c = client as Partial<IORedisLikeClient> | null
  if (typeof c !== 'object' || c === null || typeof c.eval !== 'function') {
    throw new TypeError(`svc-webhooks: ${what} needs \`client\`: an ioredis client (new Redis(url)) or a connected node-redis v4+ client (await createClient({ url }).connect()).`)
  }
  // ioredis: eval(script, numKeys, ...keysAndArgs); node-redis: eval(script, { keys, arguments }).
  // Only ioredis has defineCommand, which tells the two apart without importing either.
  let byText: Run
  let bySha: Run | undefined
  let wait: (replicas: number) => Promise<unknown>
  if (typeof c.defineCommand === 'function') {
    const io = c as IORedisLikeClient & { call(...args: (string | number)[]): Promise<unknown> }
    byText = (script, key, args) => io.eval(script, 1, key, ...args)
    if (typeof io.evalsha === 'function') bySha = (sha, key, args) => io.evalsha!(sha, 1, key, ...args)
    wait = (replicas) => io.call('WAIT', replicas, WAIT_MS)
  } else {
    const node = c as unknown as NodeRedisLikeClient & { sendCommand(args: string[]): Promise<unknown> }
    byText = (script, key, args) => node.eval(script, { keys: [key], arguments: args })
    if (typeof node.evalSha === 'function') bySha = (sha, key, args) => node.evalSha!(sha, { keys: [key], arguments: args })
    wait = (replicas) => node.sendCommand(['WAIT', String(replicas), String(WAIT_MS)])
  }
  /**
   * By SHA-1 when known, by text when the server answers NOSCRIPT (which runs nothing, so sending
   * the text then runs the script once, and leaves it cached on that server). `resent` is told
   * when the text went after a NOSCRIPT: later than the caller may assume it was sent.
   */
  const run = async (script: string, key: string, args: string[], resent?: () => void): Promise<unknown> => {
    const sha = bySha && shaOf(script)
    if (sha !== undefined) {
      try {
        return await bySha!(sha, key, args)
      } catch (error) {
        if (!isNoScript(error)) throw error
        resent?.()
      }
    }
    return byText(script, key, args)
  }
  const rediscover = sentinelRediscovery(client)
  const { replicas = 0, fenceKey = '' } = replication ?? {}
  const plain = rediscover === undefined ? run : (script: string, key: string, args: string[], resent?: () => void) => run(script, key, args, resent).catch((error: unknown) => {
    if (onStalePrimary(error)) rediscover()
    throw error
  })
  if (replicas === 0) return plain
  // Group commit: WAIT blocks its connection, so one WAIT per write would serialize every
  // request behind the replicas' round trip. A write joins the next fence + WAIT sent after it
  // (never one already sent: its fence would precede the write); at most one round is waiting
  // to start behind the one in flight, and it covers every write sent meanwhile.
  let running: Promise<void> | undefined
  let queued: Promise<number> | undefined
  const launch = (): Promise<number> => {
    // The fence goes by text: sent by SHA-1, a NOSCRIPT would put it on the wire after its WAIT.
    const round = Promise.all([byText(FENCE, fenceKey, []), wait(replicas)]).then(([, acknowledged]) => Number(acknowledged))
    const settled = round.then(() => undefined, () => undefined)
    running = settled
    void settled.then(() => {
      if (running === settled) running = undefined
    })
    return round
  }
  const replicated = (): Promise<number> => {
    if (running === undefined) return launch()
    queued ??= running.then(() => {
      queued = undefined
      return launch()
    })
    return queued
  }
  return async (script, key, args) => {
    // The script is sent first; the round it joins sends its fence and WAIT after it. Sent again
    // by text after a NOSCRIPT, it may follow that round's fence: a round begun after its reply covers it.
    let resent = false
    const sent = plain(script, key, args, () => (resent = true))
    const [reply, first] = await Promise.all([sent, replicated()])
    const count = resent ? await replicated() : first
    if (count >= replicas) return reply
    // No replica answered: this primary may be cut off and replaced. Ask Sentinel now rather
    // than wait for a connection that may never break.
    rediscover?.()
    throw new NotReplicatedError(count, replicas, reply)
  }
}

/**
 * Replies that say this connection is not on the primary Sentinel would name now: a demoted
 * primary (`READONLY`), or one that lost its replicas and refuses writes under
 * `min-replicas-to-write` (`NOREPLICAS`).
 */
function onStalePrimary(error: unknown): boolean {
  return error instanceof Error && /^(READONLY|NOREPLICAS) /.test(String(error.message))
}

/**
 * For an ioredis client of a Sentinel set: a function that makes it ask the sentinels for the
 * primary again (a reconnect, which ioredis resolves through Sentinel, its unanswered commands
 * resent), at most every 300 ms. A connection to a primary that is cut off from its set never
 * breaks by itself, and a client that waits for that keeps writing to a primary about to be
 * demoted. Undefined for other clients (node-redis's Sentinel client follows the switch itself).
 */
function sentinelRediscovery(client: unknown): (() => void) | undefined {
  const io = client as { options?: { sentinels?: unknown }; disconnect?: (reconnect?: boolean) => void; status?: unknown }
  if (!Array.isArray(io.options?.sentinels) || io.options.sentinels.length === 0 || typeof io.disconnect !== 'function') return undefined
  let last = 0
  return () => {
    const now = Date.now()
    if (now - last < REDISCOVER_MS || io.status !== 'ready') return
    last = now
    io.disconnect!(true)
  }
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

/** The server's replication section, read from inside a script (CONFIG is not allowed there). */
export const REPLICATION_INFO = `return redis.call('INFO', 'replication')`

/**
 * `durabilityWarnings()` of a Redis engine whose only promise is its replication (RedisStore,
 * RedisSecretSource): {@link replicationWarnings} of the server `read` reaches through `key`'s
 * slot, or one line saying they could not be read. Never rejects.
 *
 * @example
 * return replicationCheck(this.read, `${this.prefix}fence`, this.replicas, this.timeoutMs, 'RedisStore')
 */
export async function replicationCheck(read: Run, key: string, replicas: number, timeoutMs: number, what: string): Promise<string[]> {
  try {
    const info = await withDeadline(`${what}.durabilityWarnings`, timeoutMs, () => read(REPLICATION_INFO, key, []))
    return replicationWarnings(info, replicas, what)
  } catch (error) {
    return [`svc-webhooks: ${what} could not check the server's replication settings (${unchecked(error)}).`]
  }
}

/**
 * What in a primary's replication settings breaks the promise of `what`, one line each, once it
 * replicates or `replicas` asks it to (a single server's promise is its persistence): no
 * replica connected (a lost primary takes every acknowledged write with it), fewer replicas than
 * `replicas` asks for (every write waits out its deadline, answered 503), no
 * `min-replicas-to-write` (a primary cut off from its replicas keeps accepting writes that the
 * failover then throws away), and `replicas` 0 on a primary that has replicas (a 2xx does not wait
 * for them). `info` is `INFO replication`'s text.
 *
 * @example
 * replicationWarnings(await run(REPLICATION_INFO, key, []), 1, 'RedisStore')
 */
export function replicationWarnings(info: unknown, replicas: number, what: string): string[] {
  const text = info instanceof Uint8Array ? new TextDecoder().decode(info) : String(info)
  const field = (name: string) => new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(text)?.[1]
  const connected = Number(field('connected_slaves') ?? 0)
  // One server that was never asked to replicate: its persistence settings are its promise.
  if (replicas === 0 && connected === 0) return []
  if (field('role') !== 'master') return [`svc-webhooks: ${what}: the server is a ${field('role') ?? 'server of unknown role'}, not a primary; point the client at the primary (or at Sentinel).`]
  const warnings: string[] = []
  if (connected === 0) {
    warnings.push(`svc-webhooks: ${what}: the primary has no replica: if it is lost, every write it acknowledged is lost with it. Run two replicas and three sentinels (docs/topologies.md).`)
  } else if (connected < replicas) {
    warnings.push(`svc-webhooks: ${what}: \`replicas\` is ${replicas} but the primary has ${connected} connected: every write waits for replicas that are not there and is answered 503. Add replicas or lower \`replicas\`.`)
  }
  if (field('min_slaves_good_slaves') === undefined) {
    warnings.push(`svc-webhooks: ${what}: the primary runs with min-replicas-to-write 0: cut off from its replicas it keeps accepting writes that the failover then discards. Set min-replicas-to-write 1 and min-replicas-max-lag 10 (or less).`)
  }
  if (replicas === 0 && connected > 0) {
    warnings.push(`svc-webhooks: ${what}: \`replicas\` is 0: a 2xx does not wait for the replicas, so a failover can lose what was acknowledged just before it. Set \`replicas: 1\`.`)
  }
  return warnings
}
