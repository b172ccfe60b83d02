/**
 * `RedisStore` (`svc-webhooks/redis`, src/entries/redis.ts): the idempotency store on Redis, for
 * receivers running in more than one process or machine. It works with an `ioredis` or a
 * `node-redis` (v4+) client, adapted by its methods (src/clients/redis.ts). The store runs one Lua
 * script (redis-scripts.ts) per operation, so a fresh delivery costs two round trips (claim, then
 * complete) and each step is atomic on the server.
 */
import type { ClaimResult, IdempotencyStore } from '../contracts/store.js'
import { adapt, replicasOption, replicationCheck, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../clients/redis.js'
import { positiveOption } from '../option-checks.js'
import { budget, withDeadline } from '../clients/deadline.js'
import { CLAIM, COMPLETE, RELEASE } from './redis-scripts.js'


/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * A connected `ioredis` client, or a `node-redis` client after `await client.connect()`.
   * Keep the libraries' defaults (offline queue on): a completion sent while Redis restarts is
   * queued and lands when it is back. Attach an `error` listener: node-redis throws without one.
   */
  client: IORedisLikeClient | NodeRedisLikeClient
  /**
   * Prepended to every key, so several applications can share one Redis.
   * @default 'svc-webhooks:'
   */
  prefix?: string
  /**
   * Longest wait for one operation, retries included. Past it the operation rejects and the
   * receiver answers 503 (the sender retries), whatever the client's own reconnect settings.
   * @default 2000
   */
  timeoutMs?: number
  /**
   * Replicas that must hold a write before it counts (`WAIT`): a claim before its handler runs,
   * a completion before its 2xx, and the record behind a 200 `duplicate`. A write that does not
   * reach them in time is tried again until the receiver's deadline (its client asked to find
   * the primary through Sentinel again meanwhile), then answered 503. Use 1 with a primary, two
   * replicas, three sentinels and `min-replicas-to-write 1` (docs/topologies.md). Needs a client
   * of one primary (plain or Sentinel), not a Cluster client.
   * @default 0
   */
  replicas?: number
}

/**
 * Idempotency store on Redis: claim is `SET NX PX lease` done in one script that also reports
 * whether the id is completed or in flight; complete keeps the key for the retention window;
 * release deletes it only while this owner still holds it.
 *
 * @example
 * import Redis from 'ioredis'
 * import { RedisStore } from 'svc-webhooks/redis'
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL!) })
 * app.post('/webhooks/svc', webhooks({ secret, store, on }))
 */
export class RedisStore implements IdempotencyStore {
  readonly prefix: string
  readonly timeoutMs: number
  private readonly run: Run
  private readonly read: Run

  readonly replicas: number

  constructor({ client, prefix = 'svc-webhooks:', timeoutMs = 2000, replicas }: RedisStoreOptions) {
    if (typeof prefix !== 'string') throw new TypeError('svc-webhooks: RedisStore `prefix` must be a string.')
    this.replicas = replicasOption(replicas, client, 'RedisStore')
    this.run = adapt(client, 'RedisStore', { replicas: this.replicas, fenceKey: `${prefix}fence` })
    // The settings read promises nothing: it does not wait for replicas.
    this.read = this.replicas === 0 ? this.run : adapt(client, 'RedisStore')
    positiveOption(timeoutMs, 'RedisStore `timeoutMs`')
    this.prefix = prefix
    this.timeoutMs = timeoutMs
  }

  async claim(key: string, owner: string, leaseMs: number, deadline?: number): Promise<ClaimResult> {
    const k = this.prefix + key
    const args = [owner, String(Math.max(1, Math.ceil(leaseMs)))]
    try {
      const state = await withDeadline('RedisStore.claim', budget(this.timeoutMs, deadline), () => this.run(CLAIM, k, args), { onLate: (late) => {
        // The claim landed after we answered 503: give the id back so the retry is not held for a lease.
        if (String(late) === 'claimed') this.release(key, owner).catch(() => undefined)
      } })
      return parseClaim(state)
    } catch (error) {
      // An attempt cut off by a dropped connection may still have run: undo it if it did.
      this.release(key, owner).catch(() => undefined)
      throw error
    }
  }

  async complete(key: string, owner: string, retentionMs: number, deadline?: number): Promise<boolean> {
    const args = [owner, String(Math.max(1, Math.ceil(retentionMs)))]
    const owned = await withDeadline('RedisStore.complete', budget(this.timeoutMs, deadline), () => this.run(COMPLETE, this.prefix + key, args))
    return Number(owned) === 1
  }

  async release(key: string, owner: string): Promise<boolean> {
    const released = await withDeadline('RedisStore.release', this.timeoutMs, () => this.run(RELEASE, this.prefix + key, [owner]))
    return Number(released) === 1
  }

  /**
   * What in the server's replication settings breaks the store's promise (no replica,
   * `min-replicas-to-write` 0, fewer replicas than `replicas`): one line each, empty when none;
   * one line saying so when the settings cannot be read. Never rejects.
   *
   * @example
   * for (const line of await store.durabilityWarnings()) console.warn(line)
   */
  durabilityWarnings(): Promise<string[]> {
    return replicationCheck(this.read, `${this.prefix}fence`, this.replicas, this.timeoutMs, 'RedisStore')
  }
}

function parseClaim(state: unknown): ClaimResult {
  const text = state instanceof Uint8Array ? new TextDecoder().decode(state) : String(state)
  if (text === 'claimed' || text === 'completed' || text === 'in_flight') return text
  throw new Error('svc-webhooks: RedisStore.claim got an unexpected reply from Redis.')
}
