/**
 * `RedisSecretSource` (exported by svc-webhooks/redis): an endpoint's secret state as JSON in one
 * Redis key, read by every receiver process and written by a rotation. Works with an `ioredis` or
 * a `node-redis` (v4+) client, adapted like the store's (src/clients/redis.ts).
 */
import type { SecretSource, SecretState, SecretWriteCondition } from '../secrets/index.js'
import { positiveOption } from '../option-checks.js'
import { withDeadline } from '../clients/deadline.js'
import { adapt, isRedisRefusal, NotReplicatedError, replicasOption, replicationCheck, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../clients/redis.js'
import { hashTagOf } from '../clients/redis-keys.js'
import { GET_SECRET, SET_SECRET } from './redis-scripts.js'
import { expectedVersion, parseState, sourceError, stateText } from './source-state.js'

/** Options of {@link RedisSecretSource}. */
export interface RedisSecretSourceOptions {
  /** A connected `ioredis` client, or a `node-redis` client after `await client.connect()`. */
  client: IORedisLikeClient | NodeRedisLikeClient
  /** The key holding the state, e.g. `svc-webhooks:secret:<endpoint id>`. One key per endpoint. */
  key: string
  /**
   * Longest wait for one read or write, retries included. Below the receiver's own read deadline
   * (`secretReadTimeoutMs`, 2 s), so the reason for a failure reaches its log line.
   * @default 1500
   */
  timeoutMs?: number
  /**
   * Replicas that must hold a write (a rotation step, a grace trim) before `write()` resolves
   * true (`WAIT`), so a failover cannot bring back a secret the rotation already retired. A write
   * that does not reach them in time is tried again until `timeoutMs`, then rejects. Reads do not
   * wait. Needs a client of one primary (plain or Sentinel), not a Cluster client.
   * @default 0
   */
  replicas?: number
}

/**
 * A secret source in Redis: `read()` is one `GET` of `key`, `write()` one script that checks the
 * stored version and sets the state as JSON with the next version, atomically (a conditional
 * write: `write(state, { version })` resolves false when another writer came first). A key that
 * does not exist is a failed read (503, the sender retries): write the secret before pointing
 * receivers at it.
 *
 * @example
 * import Redis from 'ioredis'
 * import { RedisSecretSource } from 'svc-webhooks/redis'
 * const source = new RedisSecretSource({ client: new Redis(process.env.REDIS_URL!), key: 'svc-webhooks:secret:ep_123' })
 * await source.write({ secrets: [process.env.SVC_WEBHOOK_SECRET!] }) // once, when the endpoint is set up
 * app.post('/webhooks/svc', webhooks({ secret: source, on }))
 */
export class RedisSecretSource implements SecretSource {
  readonly key: string
  readonly timeoutMs: number
  readonly replicas: number
  private readonly run: Run
  private readonly reads: Run
  private readonly fenceKey: string

  constructor({ client, key, timeoutMs = 1500, replicas }: RedisSecretSourceOptions) {
    if (typeof key !== 'string' || key.length === 0) throw new TypeError('svc-webhooks: RedisSecretSource `key` must be a non-empty string.')
    this.replicas = replicasOption(replicas, client, 'RedisSecretSource')
    // Next to the state's key (same hash tag when it has one), so the fence never lands in another slot.
    const tag = hashTagOf(key)
    this.fenceKey = tag === undefined ? `${key}:fence` : `{${tag}}:fence`
    this.run = adapt(client, 'RedisSecretSource', { replicas: this.replicas, fenceKey: this.fenceKey })
    // A read promises nothing, and every receiver makes them: it does not wait for replicas.
    this.reads = this.replicas === 0 ? this.run : adapt(client, 'RedisSecretSource')
    positiveOption(timeoutMs, 'RedisSecretSource `timeoutMs`')
    this.key = key
    this.timeoutMs = timeoutMs
  }

  async read(): Promise<SecretState> {
    const value = await withDeadline('RedisSecretSource.read', this.timeoutMs, () => this.reads(GET_SECRET, this.key, []), {
      refused: isRedisRefusal,
      fail: (_kind, message, summary) => sourceError(message.replace(/^svc-webhooks: /, ''), summary),
    })
    if (value === null || value === undefined) {
      throw sourceError(`RedisSecretSource: the key "${this.key}" does not exist; write the endpoint's secret to it (source.write({ secrets: [...] })).`, undefined, true)
    }
    return parseState(value instanceof Uint8Array ? new TextDecoder().decode(value) : String(value))
  }

  /** Stores `state`; with `condition`, only if the stored version is still `condition.version`. Resolves whether it wrote. */
  async write(state: SecretState, condition?: SecretWriteCondition): Promise<boolean> {
    const text = stateText(state, 'RedisSecretSource')
    const expected = expectedVersion(condition, 'RedisSecretSource')
    // The version an attempt stored on the primary that its replicas did not confirm in time.
    let stored = ''
    const attempt = async () => {
      try {
        return await this.run(SET_SECRET, this.key, [text, expected === undefined ? '' : String(expected), stored])
      } catch (error) {
        // The retry then only waits for the replicas again: rerun as is, a conditional write
        // would meet its own version and report another writer as having come first.
        if (error instanceof NotReplicatedError && Number(error.reply) > 0) stored = String(error.reply)
        throw error
      }
    }
    // The client's error carries the command's arguments, the secrets among them: only its summary is kept.
    const version = await withDeadline('RedisSecretSource.write', this.timeoutMs, attempt, {
      refused: isRedisRefusal,
      fail: (_kind, message, summary) => sourceError(message.replace(/^svc-webhooks: /, ''), summary),
    })
    return Number(version) > 0
  }

  /**
   * What in the server's replication settings breaks the promise of `write()` (no replica,
   * `min-replicas-to-write` 0, fewer replicas than `replicas`): one line each, empty when none;
   * one line saying so when the settings cannot be read. Never rejects.
   *
   * @example
   * for (const line of await source.durabilityWarnings()) console.warn(line)
   */
  durabilityWarnings(): Promise<string[]> {
    return replicationCheck(this.reads, this.fenceKey, this.replicas, this.timeoutMs, 'RedisSecretSource')
  }
}
