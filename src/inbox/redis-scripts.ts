/**
 * The Lua scripts of `RedisInbox`, one per operation (src/inbox/redis.ts says why each key
 * exists). Each runs atomically on the server in one `EVAL` round trip, with KEYS[1] the inbox's
 * `due` key and ARGV[1] its prefix; every time inside comes from the server's `TIME`.
 */

const PRELUDE = `local P = ARGV[1]
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function held(e, lease, now)
  local f = redis.call('HMGET', e, 'state', 'lease', 'leaseUntil')
  return f[1] == 'waiting' and f[2] == lease and tonumber(f[3]) > now
end
`

/**
 * The fields a taken entry or a dead letter is read back with, in the order `readRow` expects
 * (Lua indexes 1 to 13); a take appends the lease and the primary key, `dead` the burial time
 * and the primary key.
 */
const FIELDS = `'keys', 'endpoint', 'id', 'timestamp', 'version', 'secretIndex', 'body', 'receivedAt', 'attempts', 'lastError', 'takes', 'retriesSince', 'trace'`

/** Position (0-based, in a reply row) of the field after {@link FIELDS}: the lease or the burial time; the primary key follows it. */
export const EXTRA = 13

// ARGV: prefix, append token, keys (JSON), endpoint, id, timestamp, version, secretIndex,
// body (base64), receivedAt, traceparent ('' for none), the key and order it is filed under
// (`fkey`, `forder`: an inbox with `ordering`; '' for none), then each dedupe key (the primary first).
export const APPEND = `${PRELUDE}
local pk = ARGV[14]
for i = 14, #ARGV do
  local v = redis.call('GET', P .. 'k:' .. ARGV[i])
  if v then
    if i == 14 and v == 'a:' .. ARGV[2] then return 'accepted' end
    return 'duplicate'
  end
end
local now = clock()
for i = 14, #ARGV do redis.call('SET', P .. 'k:' .. ARGV[i], 'a:' .. ARGV[2]) end
local e = P .. 'e:' .. pk
redis.call('HSET', e, 'keys', ARGV[3], 'endpoint', ARGV[4], 'id', ARGV[5], 'timestamp', ARGV[6],
  'version', ARGV[7], 'secretIndex', ARGV[8], 'body', ARGV[9], 'receivedAt', ARGV[10], 'attempts', 0,
  'takes', 0, 'retriesSince', ARGV[10], 'trace', ARGV[11], 'state', 'waiting', 'lease', '', 'leaseUntil', 0)
if ARGV[13] ~= '' then redis.call('HSET', e, 'fkey', ARGV[12], 'forder', ARGV[13]) end
redis.call('ZADD', KEYS[1], now, pk)
redis.call('ZADD', P .. 'recv', ARGV[10], pk)
return 'accepted'`

// ARGV: prefix, max, visibilityMs, lease token. Replies one row per entry: FIELDS, the lease,
// the primary key. Leases are <token>.<n> with a token drawn at random by the caller for each
// attempt, never from a counter on the server: a counter restored from an older snapshot (an
// RDB restart, an AOF that lost its last second) would hand out leases a stale holder still has.
// Takes are counted here, atomically with the lease, so a take whose holder dies is counted too.
export const TAKE = `${PRELUDE}
local now = clock()
local expiry = now + tonumber(ARGV[3])
local pks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local rows = {}
for i, pk in ipairs(pks) do
  local e = P .. 'e:' .. pk
  if redis.call('EXISTS', e) == 1 then
    local row = redis.call('HMGET', e, ${FIELDS})
    local lease = ARGV[4] .. '.' .. i
    row[11] = redis.call('HINCRBY', e, 'takes', 1)
    redis.call('HSET', e, 'lease', lease, 'leaseUntil', expiry)
    redis.call('ZADD', KEYS[1], expiry, pk)
    row[14] = lease
    row[15] = pk
    rows[#rows + 1] = row
  else
    -- Its hash was deleted by hand: drop the orphan rather than fail every take.
    redis.call('ZREM', KEYS[1], pk)
    redis.call('ZREM', P .. 'recv', pk)
  end
end
return rows`

// ARGV: prefix, primary key, lease. Gives back a lease nobody will use (a take that answered
// after its caller gave up): due now, and the take uncounted, since no handler ran.
export const RELEASE = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then return 0 end
if (tonumber(redis.call('HGET', e, 'takes')) or 0) > 0 then redis.call('HINCRBY', e, 'takes', -1) end
redis.call('HSET', e, 'lease', '', 'leaseUntil', 0)
redis.call('ZADD', KEYS[1], now, pk)
return 1`

/**
 * `completeHeld(e, pk, lease)`: completes the entry `e` (primary key `pk`) its caller checked is
 * held by `lease`: its dedupe keys marked processed by that lease for ARGV[4] ms (a repeat by the
 * same lease then answers done), the entry gone. Shared by COMPLETE and the ordered completion
 * that hands out the key's next head (redis-order-scripts.ts).
 */
export const COMPLETE_HELD = `local function completeHeld(e, pk, lease)
  for _, key in ipairs(cjson.decode(redis.call('HGET', e, 'keys'))) do
    redis.call('SET', P .. 'k:' .. key, 'p:' .. lease, 'PX', ARGV[4])
  end
  redis.call('DEL', e)
  redis.call('ZREM', KEYS[1], pk)
  redis.call('ZREM', P .. 'recv', pk)
  redis.call('SREM', P .. 'retrying', pk)
end
`

// ARGV: prefix, primary key, lease, retentionMs. A repeat by the same lease answers 1 again.
export const COMPLETE = `${PRELUDE}${COMPLETE_HELD}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
if not held(e, lease, clock()) then
  if redis.call('GET', P .. 'k:' .. pk) == 'p:' .. lease then return 1 end
  return 0
end
completeHeld(e, pk, lease)
return 1`

// ARGV: prefix, primary key, lease, delayMs, error. `retriedLease` makes a repeat answer 1.
export const RETRY = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then
  if redis.call('HGET', e, 'retriedLease') == lease then return 1 end
  return 0
end
redis.call('HINCRBY', e, 'attempts', 1)
redis.call('HSET', e, 'lastError', ARGV[5], 'lease', '', 'leaseUntil', 0, 'retriedLease', lease)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), pk)
redis.call('SADD', P .. 'retrying', pk)
return 1`

// ARGV: prefix, primary key, lease, error. The entry keeps its lease once dead, so a repeat answers 1.
export const BURY = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then
  local f = redis.call('HMGET', e, 'state', 'lease')
  if f[1] == 'dead' and f[2] == lease then return 1 end
  return 0
end
redis.call('HINCRBY', e, 'attempts', 1)
redis.call('HSET', e, 'lastError', ARGV[4], 'state', 'dead', 'leaseUntil', 0, 'deadAt', now)
redis.call('ZREM', KEYS[1], pk)
redis.call('ZREM', P .. 'recv', pk)
redis.call('SREM', P .. 'retrying', pk)
redis.call('ZADD', P .. 'dead', now, pk)
return 1`

// ARGV: prefix, primary key, lease, visibilityMs.
export const EXTEND = `${PRELUDE}
local pk, lease = ARGV[2], ARGV[3]
local e = P .. 'e:' .. pk
local now = clock()
if not held(e, lease, now) then return 0 end
redis.call('HSET', e, 'leaseUntil', now + tonumber(ARGV[4]))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), pk)
return 1`

// ARGV: prefix, last index (limit - 1, or -1 for all). Replies one row per dead letter: FIELDS,
// deadAt, the primary key.
export const DEAD = `${PRELUDE}
local rows = {}
for i, pk in ipairs(redis.call('ZRANGE', P .. 'dead', 0, ARGV[2])) do
  local row = redis.call('HMGET', P .. 'e:' .. pk, ${FIELDS}, 'deadAt')
  row[15] = pk
  rows[i] = row
end
return rows`

// ARGV: prefix, primary key. A full retry budget: attempts and takes back to 0, retriesSince now.
export const REQUEUE = `${PRELUDE}
local pk = ARGV[2]
local e = P .. 'e:' .. pk
if redis.call('ZREM', P .. 'dead', pk) == 0 then return 0 end
local now = clock()
redis.call('HSET', e, 'attempts', 0, 'takes', 0, 'retriesSince', now, 'state', 'waiting', 'lease', '', 'leaseUntil', 0)
redis.call('HDEL', e, 'lastError', 'deadAt', 'retriedLease')
redis.call('ZADD', KEYS[1], now, pk)
redis.call('ZADD', P .. 'recv', redis.call('HGET', e, 'receivedAt') or now, pk)
return 1`

// ARGV: prefix, primary key, retentionMs. The dead letter goes; its keys stay processed for the
// retention window (a resend is a duplicate). An entry whose keys cannot be read keeps its primary key.
export const PURGE = `${PRELUDE}
local pk = ARGV[2]
local e = P .. 'e:' .. pk
if redis.call('ZREM', P .. 'dead', pk) == 0 then return 0 end
local ok, keys = pcall(cjson.decode, redis.call('HGET', e, 'keys') or '')
if not ok or type(keys) ~= 'table' then keys = { pk } end
for _, key in ipairs(keys) do
  if type(key) == 'string' then redis.call('SET', P .. 'k:' .. key, 'p:purged', 'PX', ARGV[3]) end
end
redis.call('DEL', e)
return 1`

// ARGV: prefix. Replies depth, oldest age (ms, by the server clock), retrying, dead, and the
// flow state (paused, by, perSecond: redis-order-scripts.ts).
export const STATS = `${PRELUDE}
local now = clock()
local oldest = redis.call('ZRANGE', P .. 'recv', 0, 0, 'WITHSCORES')
local age = 0
if oldest[2] then age = math.max(0, now - tonumber(oldest[2])) end
return { redis.call('ZCARD', KEYS[1]), age, redis.call('SCARD', P .. 'retrying'), redis.call('ZCARD', P .. 'dead'),
  redis.call('HMGET', P .. 'flow', 'paused', 'by', 'perSecond') }`

// ARGV: prefix. INFO works inside a script where CONFIG GET does not ("not allowed from script"):
// replies the persistence and memory sections.
export const SETTINGS = `return { redis.call('INFO', 'persistence'), redis.call('INFO', 'memory') }`

// The ordering scripts (redis-order-scripts.ts) build on the same prelude and fields.
export { PRELUDE as PRELUDE_TEXT, FIELDS as FIELDS_TEXT }
