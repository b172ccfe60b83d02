/**
 * Moving a `RedisInbox` from one key prefix to another on a single Redis server: what an upgrade
 * from the default prefix without a hash tag (`svc-webhooks:inbox:`, before 0.2.0) to the tagged
 * one (`{svc-webhooks:inbox}:`) needs, so the deliveries accepted under the old prefix are
 * processed and its dedupe records keep resends duplicates. Also the check that finds deliveries
 * still waiting under the old prefix, which `RedisInbox.durabilityWarnings()` reports.
 */
import { adapt, type IORedisLikeClient, type NodeRedisLikeClient, type Run } from '../clients/redis.js'
import { isRedisCluster } from '../clients/redis-keys.js'

/** The default prefix before it carried a hash tag. */
export const LEGACY_PREFIX = 'svc-webhooks:inbox:'
/** RedisInbox's default prefix: its hash tag keeps every key of the inbox in one Cluster slot. */
export const DEFAULT_PREFIX = '{svc-webhooks:inbox}:'

// ARGV: from, to, cursor, pattern, count. Renames each key of one SCAN page from `from` to `to`;
// where `to` already holds the key (receivers on the new prefix appended meanwhile), the sorted
// sets and sets are merged into it and the old key dropped, and for a delivery's hash or a dedupe
// record the one under `to` (the newer) is kept. RENAME keeps a dedupe record's expiry.
const MOVE = `local from, to = ARGV[1], ARGV[2]
local page = redis.call('SCAN', ARGV[3], 'MATCH', ARGV[4], 'COUNT', ARGV[5])
local moved, merged = 0, 0
for _, k in ipairs(page[2]) do
  local dest = to .. string.sub(k, #from + 1)
  if redis.call('EXISTS', dest) == 0 then
    redis.call('RENAME', k, dest)
    moved = moved + 1
  else
    local t = redis.call('TYPE', k)['ok']
    if t == 'zset' then redis.call('ZUNIONSTORE', dest, 2, dest, k, 'AGGREGATE', 'MIN')
    elseif t == 'set' then redis.call('SUNIONSTORE', dest, dest, k) end
    redis.call('DEL', k)
    merged = merged + 1
  end
end
return { page[1], moved, merged }`

// ARGV: prefix. Deliveries waiting and dead letters under it.
const COUNT = `return { redis.call('ZCARD', ARGV[1] .. 'due'), redis.call('ZCARD', ARGV[1] .. 'dead') }`

/** A glob pattern matching `text` literally. */
const literal = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)

/**
 * Lines for deliveries that wait under `from` while the inbox reads `to`; none when there are
 * none or the server cannot be asked (the caller's own check reports an unreachable server).
 */
export async function legacyWarnings(run: Run, from: string, to: string): Promise<string[]> {
  try {
    const [waiting, dead] = ((await run(COUNT, `${from}due`, [from])) as unknown[]).map(Number)
    if (!(waiting! > 0 || dead! > 0)) return []
    return [
      `svc-webhooks: RedisInbox: ${waiting} delivery(ies) and ${dead} dead letter(s) wait under the prefix "${from}", the default before 0.2.0; ` +
        `this inbox reads "${to}", so they are not processed. Move them once: await moveRedisInboxPrefix({ client }) from svc-webhooks/redis ` +
        '(docs/topologies.md "Redis Cluster").',
    ]
  } catch {
    return []
  }
}

/** Options of {@link moveRedisInboxPrefix}. */
export interface MoveRedisInboxPrefixOptions {
  /** A client of the single Redis server the inbox lives on (not a Cluster: the old keys were never usable there). */
  client: IORedisLikeClient | NodeRedisLikeClient
  /** @default 'svc-webhooks:inbox:' (the default before 0.2.0) */
  from?: string
  /** @default '{svc-webhooks:inbox}:' (the default since 0.2.0) */
  to?: string
  /**
   * Keys looked at per script run (one SCAN page): bounds how long the server is held at once.
   * @default 500
   */
  batch?: number
}

/**
 * Moves every key of a `RedisInbox` from the prefix `from` to `to` on a single Redis server:
 * waiting deliveries, leases, retries, dead letters and the dedupe records (with their expiry).
 * Safe to run again, and safe while receivers on the new version append under `to` (what is there
 * is merged, not overwritten); stop the workers of the old version first. Resolves with how many
 * keys were renamed and merged.
 *
 * @example
 * import { moveRedisInboxPrefix } from 'svc-webhooks/redis'
 * await moveRedisInboxPrefix({ client: new Redis(process.env.REDIS_URL!) }) // svc-webhooks:inbox: -> {svc-webhooks:inbox}:
 */
export async function moveRedisInboxPrefix({ client, from = LEGACY_PREFIX, to = DEFAULT_PREFIX, batch = 500 }: MoveRedisInboxPrefixOptions): Promise<{ moved: number; merged: number }> {
  const run = adapt(client, 'moveRedisInboxPrefix')
  if (isRedisCluster(client)) throw new TypeError('svc-webhooks: moveRedisInboxPrefix runs on a single Redis server: on a Cluster the old prefix never held a working inbox.')
  if (typeof from !== 'string' || typeof to !== 'string' || from === '' || from === to || to.startsWith(from)) {
    throw new TypeError('svc-webhooks: moveRedisInboxPrefix needs two different, non-empty prefixes, `to` not starting with `from`.')
  }
  if (!Number.isSafeInteger(batch) || batch <= 0) throw new TypeError('svc-webhooks: moveRedisInboxPrefix `batch` must be a positive whole number.')
  let cursor = '0'
  let moved = 0
  let merged = 0
  // SCAN ends when its cursor comes back to 0; a page never repeats a key it renamed away.
  do {
    const [next, m, g] = (await run(MOVE, `${from}due`, [from, to, cursor, `${literal(from)}*`, String(batch)])) as unknown[]
    cursor = String(next)
    moved += Number(m)
    merged += Number(g)
  } while (cursor !== '0')
  return { moved, merged }
}
