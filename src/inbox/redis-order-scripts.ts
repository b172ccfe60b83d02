/**
 * The Lua scripts of RedisInbox's ordering and flow control (DESIGN.md "Order within a
 * conversation", "Flow control"; the contract is src/contracts/ordering.ts). KEYS[1] is the
 * inbox's `due` ZSET and ARGV[1] its prefix, as in src/inbox/redis-scripts.ts, whose PRELUDE and
 * FIELDS these reuse. Keys they add under the prefix:
 *
 * - `o:<key>`: a ZSET per ordering key, every score 0, members `<order>|<primary key>`: with equal
 *   scores Redis sorts by member bytes, and the order text is fixed-width, so `ZRANGE o:<key> 0 0`
 *   is the head. Completed, buried or purged members are dropped lazily by the take that meets them.
 * - `oh:<key>`: a HASH: `pk`, `lease` and `order` of the head last handed out (the key's holder),
 *   and `last`, the highest order completed, which tells a late delivery: the next take of the
 *   key finds a holder whose entry is gone (completed) and raises `last` to its order. Kept for
 *   the retention window.
 * - `okdue`: a ZSET of keys scored by when each is next worth looking at: now for a key with a
 *   new delivery or a finished head (a poke), its holder's lease expiry, or its strict head's
 *   retry time. A take reads the due keys only, never every key.
 * - `placing`: a ZSET of deliveries leased to be placed, by lease expiry: while one is there, no
 *   head is handed out (its key is not known yet and it could be older than a head).
 * - `flow`: a HASH: the pause flag (`paused`, `by`, `since`, `version`) and the token bucket
 *   (`tokens`, `at`, `perSecond`).
 *
 * A placed delivery stays in `due`, *parked*: its score is PARK plus the time it was parked, so
 * depth (`ZCARD due`) still counts it and a plain take (`-inf .. now`) never reaches it. The
 * shared scripts (retry, extend, release) put a real time back in its score; when that time comes
 * the ordered take parks it again and looks at its key at once, which is how a retry coming due or
 * a crashed holder's lease ending frees the key.
 */
import { PRELUDE_TEXT as PRELUDE, FIELDS_TEXT as FIELDS } from './redis-scripts.js'
import { ORDER_WIDTH } from './ordering.js'

/** 2^50 ms: far past any real time, and PARK + a time is still an exact double. */
const PARK = '1125899906842624'

// ARGV: prefix, max, visibilityMs, token, placeLeaseMs, placeBatch, retentionMs, poke count,
// then the poked keys. Replies { 'place', rows } (FIELDS, lease, primary key), { 'busy' } or
// { 'run', rows } (FIELDS, lease, primary key, key, late 0/1).
export const TAKE_ORDERED = `${PRELUDE}
local PARK = ${PARK}
local W = ${ORDER_WIDTH}
local now = clock()
local max, vis, token = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local placeLease, batch, retention = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local KD, PL = P .. 'okdue', P .. 'placing'
for i = 9, 8 + tonumber(ARGV[8]) do
  if redis.call('EXISTS', P .. 'o:' .. ARGV[i]) == 1 then redis.call('ZADD', KD, now, ARGV[i]) end
end
local place = {}
local scanned = 0
while #place < batch and scanned < 2000 do
  local pks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
  if #pks == 0 then break end
  for _, pk in ipairs(pks) do
    scanned = scanned + 1
    local e = P .. 'e:' .. pk
    if redis.call('EXISTS', e) == 0 then
      redis.call('ZREM', KEYS[1], pk)
      redis.call('ZREM', P .. 'recv', pk)
    else
      local f = redis.call('HMGET', e, 'okey', 'oorder')
      if f[1] then
        -- Placed, and its retry or lease time came: parked again, its key looked at now.
        redis.call('ZADD', KEYS[1], PARK + now, pk)
        redis.call('ZADD', P .. 'o:' .. f[1], 0, f[2] .. '|' .. pk)
        redis.call('ZADD', KD, now, f[1])
      elseif #place < batch then
        local lease = token .. '.p' .. (#place + 1)
        local row = redis.call('HMGET', e, ${FIELDS})
        redis.call('HSET', e, 'lease', lease, 'leaseUntil', now + placeLease)
        redis.call('ZADD', KEYS[1], now + placeLease, pk)
        redis.call('ZADD', PL, now + placeLease, pk)
        row[14] = lease
        row[15] = pk
        place[#place + 1] = row
      end
    end
  end
end
if #place > 0 then return { 'place', place } end
redis.call('ZREMRANGEBYSCORE', PL, '-inf', now)
if redis.call('ZCARD', PL) > 0 then return { 'busy' } end
local run = {}
local keys = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'LIMIT', 0, max * 4 + 16)
for _, key in ipairs(keys) do
  if #run >= max then break end
  local O, H = P .. 'o:' .. key, P .. 'oh:' .. key
  local h = redis.call('HMGET', H, 'pk', 'lease', 'last', 'order')
  local last = h[3]
  local busy = nil
  if h[1] then
    local hf = redis.call('HMGET', P .. 'e:' .. h[1], 'state', 'lease', 'leaseUntil')
    if hf[1] == 'waiting' and hf[2] == h[2] and tonumber(hf[3]) > now then
      busy = tonumber(hf[3])
    elseif not hf[1] then
      -- The last holder's entry is gone: completed, unless purged as a dead letter. Every run is
      -- a holder's, so this sees every completion: its order is what a later, older arrival is
      -- late against.
      local v = redis.call('GET', P .. 'k:' .. h[1])
      if v and v ~= 'p:purged' and h[4] and (not last or h[4] > last) then
        last = h[4]
        redis.call('HSET', H, 'last', last)
      end
      redis.call('HDEL', H, 'pk', 'lease', 'order')
      redis.call('PEXPIRE', H, retention)
    end
  end
  local chosen, nextAt = nil, nil
  if not busy then
    for _, m in ipairs(redis.call('ZRANGE', O, 0, 31)) do
      local pk = string.sub(m, W + 2)
      local f = redis.call('HMGET', P .. 'e:' .. pk, 'state', 'lease', 'leaseUntil', 'okey', 'ostrict')
      if not f[1] or f[1] == 'dead' or f[4] ~= key then
        -- Completed, buried, purged or placed again elsewhere: no longer of this key.
        redis.call('ZREM', O, m)
      elseif f[2] and f[2] ~= '' and tonumber(f[3]) > now then
        busy = tonumber(f[3])
        break
      else
        local score = tonumber(redis.call('ZSCORE', KEYS[1], pk)) or 0
        if score < PARK and score > now then
          -- Retrying: a strict head holds the key until then; otherwise later ones pass.
          if not nextAt or score < nextAt then nextAt = score end
          if f[5] == '1' then break end
        else
          chosen = { pk = pk, order = string.sub(m, 1, W) }
          break
        end
      end
    end
  end
  if busy then
    redis.call('ZADD', KD, busy, key)
  elseif chosen then
    local e = P .. 'e:' .. chosen.pk
    local lease = token .. '.r' .. (#run + 1)
    local row = redis.call('HMGET', e, ${FIELDS})
    row[11] = redis.call('HINCRBY', e, 'takes', 1)
    redis.call('HSET', e, 'lease', lease, 'leaseUntil', now + vis)
    redis.call('ZADD', KEYS[1], now + vis, chosen.pk)
    redis.call('HSET', H, 'pk', chosen.pk, 'lease', lease, 'order', chosen.order)
    redis.call('PEXPIRE', H, retention)
    redis.call('ZADD', KD, now + vis, key)
    row[14] = lease
    row[15] = chosen.pk
    row[16] = key
    if last and chosen.order < last then row[17] = 1 else row[17] = 0 end
    run[#run + 1] = row
  elseif nextAt then
    redis.call('ZADD', KD, nextAt, key)
  elseif redis.call('ZCARD', O) == 0 then
    redis.call('ZREM', KD, key)
  else
    -- Thirty-two members met and none runnable nor waiting: looked at again shortly.
    redis.call('ZADD', KD, now + 1000, key)
  end
end
return { 'run', run }`

// ARGV: prefix, then per delivery: primary key, lease, key, order, strict ('1' or '0'). Replies
// 1 or 0 each (0: the placing lease was lost).
export const PLACE = `${PRELUDE}
local PARK = ${PARK}
local now = clock()
local out = {}
for i = 2, #ARGV, 5 do
  local pk, lease, key, order = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local e = P .. 'e:' .. pk
  if held(e, lease, now) and not redis.call('HGET', e, 'okey') then
    redis.call('HSET', e, 'okey', key, 'oorder', order, 'ostrict', ARGV[i + 4], 'lease', '', 'leaseUntil', 0)
    redis.call('ZADD', KEYS[1], PARK + now, pk)
    redis.call('ZREM', P .. 'placing', pk)
    redis.call('ZADD', P .. 'o:' .. key, 0, order .. '|' .. pk)
    redis.call('ZADD', P .. 'okdue', now, key)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out`

// ARGV: prefix, want, perSecond ('' for no limit), burst. Replies granted, waitMs, paused (0/1),
// by, since, version. The bucket refills by the server clock, so workers whose clocks disagree share one rate.
export const ADMIT = `${PRELUDE}
local now = clock()
local F = P .. 'flow'
local f = redis.call('HMGET', F, 'paused', 'by', 'since', 'version', 'tokens', 'at')
local version = tonumber(f[4]) or 0
if f[1] == '1' then return { 0, 0, 1, f[2] or '', tonumber(f[3]) or 0, version } end
local want = tonumber(ARGV[2])
if ARGV[3] == '' then return { want, 0, 0, '', 0, version } end
local rate, burst = tonumber(ARGV[3]), tonumber(ARGV[4])
local tokens = tonumber(f[5])
if tokens == nil then tokens = burst else tokens = math.min(burst, tokens + math.max(0, now - tonumber(f[6])) * rate / 1000) end
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
redis.call('HSET', F, 'tokens', string.format('%.6f', tokens), 'at', now, 'perSecond', ARGV[3])
local wait = 0
if granted == 0 then wait = math.ceil((1 - tokens) * 1000 / rate) end
return { granted, wait, 0, '', 0, version }`

// ARGV: prefix, tokens, burst.
export const REFUND = `local F = ARGV[1] .. 'flow'
local tokens = tonumber(redis.call('HGET', F, 'tokens'))
if tokens == nil then return 0 end
redis.call('HSET', F, 'tokens', string.format('%.6f', math.min(tonumber(ARGV[3]), tokens + tonumber(ARGV[2]))))
return 1`

// ARGV: prefix, paused ('1' or '0'), by, expected version ('' for any). A conditional write: nil
// when the version moved. Replies paused, by, since, version.
export const SET_PAUSE = `${PRELUDE}
local F = P .. 'flow'
local version = tonumber(redis.call('HGET', F, 'version')) or 0
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= version then return false end
local now = clock()
version = version + 1
if ARGV[2] == '1' then
  redis.call('HSET', F, 'paused', '1', 'by', ARGV[3], 'since', now, 'version', version)
  return { 1, ARGV[3], now, version }
end
redis.call('HSET', F, 'paused', '0', 'version', version)
redis.call('HDEL', F, 'by', 'since')
return { 0, '', 0, version }`

// ARGV: prefix. Replies paused, by, since, version, perSecond.
export const FLOW = `local f = redis.call('HMGET', ARGV[1] .. 'flow', 'paused', 'by', 'since', 'version', 'perSecond')
return { f[1] == '1' and 1 or 0, f[2] or '', tonumber(f[3]) or 0, tonumber(f[4]) or 0, f[5] or '' }`
