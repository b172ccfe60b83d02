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
 * - `mode:ordered`, `mode:unordered`: a ZSET each of the running workers of that mode, scored by
 *   when each one's mark ends (renewed while it runs, removed when it stops): a worker of the other
 *   mode takes nothing while one is live.
 *
 * A placed delivery stays in `due`, *parked*: its score is PARK plus the time it was parked, so
 * depth (`ZCARD due`) still counts it and a plain take (`-inf .. now`) never reaches it. The
 * shared scripts (retry, extend, release) put a real time back in its score; when that time comes
 * the ordered take parks it again and looks at its key at once, which is how a retry coming due or
 * a crashed holder's lease ending frees the key.
 */
import { COMPLETE_HELD, PRELUDE_TEXT as PRELUDE, FIELDS_TEXT as FIELDS } from './redis-scripts.js'
import { ORDER_WIDTH } from './ordering.js'

/** 2^50 ms: far past any real time, and PARK + a time is still an exact double. */
const PARK = '1125899906842624'

/**
 * A script as sent: without its comment lines and indentation. EVAL carries the whole text on
 * every call, and the ordered take is called once or twice per few deliveries: its comments were
 * a third of what each call wrote to the socket and the server read. (No string in these scripts
 * holds `--` or a line break.)
 */
const sent = (script: string): string => script.replace(/^[ \t]*--.*\n/gm, '').replace(/^[ \t]+/gm, '')

/** Body bytes (base64) handed out to be placed in one reply, at most (one delivery always goes). */
const PLACE_BYTES = 4 * 1024 * 1024

/**
 * `many(command, key, args, flag?)`: one variadic command (ZADD, ZREM) for a batch's members, in chunks
 * that stay far below Lua's limit on unpacked values. A call per member costs the script more
 * than the command itself: placing a batch is a few calls per delivery, not seven.
 */
const MANY = `local function many(command, key, args, flag)
  for i = 1, #args, 1000 do
    if flag then
      redis.call(command, key, flag, unpack(args, i, math.min(i + 999, #args)))
    else
      redis.call(command, key, unpack(args, i, math.min(i + 999, #args)))
    end
  end
end
`

/**
 * `file(e, pk, key, order, strict, now, parked, members, keys)`: places the delivery `pk` (its
 * hash `e`) under `key` at `order`: its fields now, and what the caller writes in one command per
 * key after its loop: its parked score in `due` (`parked`), its member in the key's ZSET
 * (`members[key]`) and the key to look at now (`keys`, for `okdue`). Shared by placeAll (a
 * worker's placements) and the ordered take (deliveries filed at append).
 */
const FILE = `local function file(e, pk, key, order, strict, now, parked, members, keys)
  redis.call('HSET', e, 'okey', key, 'oorder', order, 'ostrict', strict, 'lease', '', 'leaseUntil', 0)
  parked[#parked + 1] = ${PARK} + now
  parked[#parked + 1] = pk
  local m = members[key]
  if not m then
    m = {}
    members[key] = m
    keys[#keys + 1] = now
    keys[#keys + 1] = key
  end
  m[#m + 1] = 0
  m[#m + 1] = order .. '|' .. pk
end
`

/**
 * `placeAll(first, now)`: places the deliveries described from ARGV[first]: a count of groups,
 * then per group its placing lease, strict ('1' or '0') and a count, then two values per delivery
 * (key, member `<order>|<primary key>`, the member it gets in its key's ZSET: the primary key and
 * the order are cut from it, so neither is sent twice); a table of 1 or 0 each, in that order (0:
 * the placing lease was lost). Shared by PLACE and by TAKE_ORDERED, which places the batch its
 * caller computed before taking, in the same round trip. A batch shares one lease and one strict
 * flag: two values per delivery instead of five, on the wire and in the script's ARGV.
 */
const PLACE_ALL = `local function placeAll(first, now)
  local out = {}
  local parked, placed, keys, members = {}, {}, {}, {}
  local i = first + 1
  for _ = 1, tonumber(ARGV[first]) or 0 do
    local lease, strict, count = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
    i = i + 3
    for _ = 1, count do
      local key, member = ARGV[i], ARGV[i + 1]
      i = i + 2
      local pk = string.sub(member, ${ORDER_WIDTH} + 2)
      local e = P .. 'e:' .. pk
      -- Still held by this placer's lease, and not placed already: one read.
      local f = redis.call('HMGET', e, 'state', 'lease', 'leaseUntil', 'okey')
      if f[1] == 'waiting' and f[2] == lease and tonumber(f[3]) > now and not f[4] then
        file(e, pk, key, string.sub(member, 1, ${ORDER_WIDTH}), strict, now, parked, members, keys)
        placed[#placed + 1] = pk
        out[#out + 1] = 1
      else
        out[#out + 1] = 0
      end
    end
  end
  many('ZADD', KEYS[1], parked)
  many('ZREM', P .. 'placing', placed)
  for key, m in pairs(members) do many('ZADD', P .. 'o:' .. key, m) end
  many('ZADD', P .. 'okdue', keys)
  return out
end
`

// ARGV: prefix, max, visibilityMs, token, placeLeaseMs, placeBatch, retentionMs, filed strict
// ('1' or '0': deliveries filed at append are placed here, with that strict; '' to hand them out
// like the rest), poke count, the poked keys, then the placements to make first, as for PLACE (a
// count of groups, 0 for none). Replies { 'place', rows, lease } (rows of body, receivedAt,
// primary key: what placing reads; one placing lease for the batch), { 'busy' }, { 'more' }
// (filed deliveries placed, and more may be due: take again) or { 'run', rows } (FIELDS, lease,
// primary key, key, late 0/1).
export const TAKE_ORDERED = sent(`${PRELUDE}${MANY}${FILE}${PLACE_ALL}
local PARK = ${PARK}
local W = ${ORDER_WIDTH}
local now = clock()
local max, vis, token = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local placeLease, batch, retention = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local KD, PL = P .. 'okdue', P .. 'placing'
local filedStrict = ARGV[8]
-- A poked key is looked at now. XX: a key with deliveries is always in okdue (its last one
-- leaves it only once its ZSET is empty), so only those are touched.
local poked = tonumber(ARGV[9])
placeAll(10 + poked, now)
local pokes = {}
for i = 10, 9 + poked do
  pokes[#pokes + 1] = now
  pokes[#pokes + 1] = ARGV[i]
end
many('ZADD', KD, pokes, 'XX')
local place = {}
-- Scores are written after the scan (one ZADD of many members each), so the ranges read while
-- scanning stay put: read on from an offset.
local leased, reparked, gone = {}, {}, {}
-- Filed deliveries placed here: their keys' members and the keys to look at, as in placeAll.
local filedKeys, filedMembers = {}, {}
local offset, full = 0, false
-- Bodies are up to 1 MiB: a batch stops once its bodies pass PLACE_BYTES, so one reply stays bounded.
local bytes = 0
-- One placing lease for the whole batch: the batch is placed (or not) by the one caller it went to.
local placeToken = token .. '.p'
while #place < batch and bytes < ${PLACE_BYTES} and offset < 2000 do
  local pks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', offset, 100)
  if #pks == 0 then break end
  offset = offset + #pks
  full = #pks == 100
  for _, pk in ipairs(pks) do
    local e = P .. 'e:' .. pk
    -- Whether it is placed, or filed at append: one read, without the body.
    local row = redis.call('HMGET', e, 'okey', 'oorder', 'fkey', 'forder', 'receivedAt')
    if row[1] then
      -- Placed, and its retry or lease time came: parked again, its key looked at now.
      reparked[#reparked + 1] = PARK + now
      reparked[#reparked + 1] = pk
      redis.call('ZADD', P .. 'o:' .. row[1], 0, row[2] .. '|' .. pk)
      redis.call('ZADD', KD, now, row[1])
    elseif not row[5] and redis.call('EXISTS', e) == 0 then
      gone[#gone + 1] = pk
    elseif row[4] and filedStrict ~= '' then
      -- Filed at append: placed here as placeAll would, no worker needed.
      file(e, pk, row[3], row[4], filedStrict, now, reparked, filedMembers, filedKeys)
    elseif #place < batch and bytes < ${PLACE_BYTES} then
      local body = redis.call('HGET', e, 'body')
      bytes = bytes + string.len(body or '')
      redis.call('HSET', e, 'lease', placeToken, 'leaseUntil', now + placeLease)
      leased[#leased + 1] = now + placeLease
      leased[#leased + 1] = pk
      place[#place + 1] = { body, row[5], pk }
    end
  end
end
many('ZADD', KEYS[1], leased)
many('ZADD', KEYS[1], reparked)
many('ZADD', PL, leased)
many('ZREM', KEYS[1], gone)
many('ZREM', P .. 'recv', gone)
for key, m in pairs(filedMembers) do many('ZADD', P .. 'o:' .. key, m) end
many('ZADD', KD, filedKeys)
if #place > 0 then return { 'place', place, placeToken } end
-- The scan stopped at its bound with more due: none of them may be older than a head.
if full and offset >= 2000 then return { 'more' } end
redis.call('ZREMRANGEBYSCORE', PL, '-inf', now)
if redis.call('ZCARD', PL) > 0 then return { 'busy' } end
local run = {}
-- Scores of keys (okdue) and of leased heads (due), written once after the walk.
local kd, kdGone, heads = {}, {}, {}
local keys = redis.call('ZRANGEBYSCORE', KD, '-inf', now, 'LIMIT', 0, max * 4 + 16)
for _, key in ipairs(keys) do
  if #run >= max then break end
  local O, H = P .. 'o:' .. key, P .. 'oh:' .. key
  local h = redis.call('HMGET', H, 'pk', 'lease', 'last', 'order')
  local last = h[3]
  local busy = nil
  -- The last holder's entry is gone: its pk, lease and order leave H (replaced by the next head's).
  local freed, raised = false, false
  if h[1] then
    local hf = redis.call('HMGET', P .. 'e:' .. h[1], 'state', 'lease', 'leaseUntil')
    if hf[1] == 'waiting' and hf[2] == h[2] and tonumber(hf[3]) > now then
      busy = tonumber(hf[3])
    elseif not hf[1] then
      -- Completed, unless purged as a dead letter. Every run is a holder's, so this sees every
      -- completion: its order is what a later, older arrival is late against.
      local v = redis.call('GET', P .. 'k:' .. h[1])
      if v and v ~= 'p:purged' and h[4] and (not last or h[4] > last) then
        last = h[4]
        raised = true
      end
      freed = true
      -- Its member goes now, so the walk below starts at the next one.
      if h[4] then redis.call('ZREM', O, h[4] .. '|' .. h[1]) end
    end
  end
  local chosen, nextAt = nil, nil
  if not busy then
    -- The first few members, then the rest of the first thirty-two if those did not decide:
    -- the head is nearly always the first.
    local seen, removed, size, decided = 0, 0, 4, false
    while size > 0 and not decided do
      local members = redis.call('ZRANGE', O, seen - removed, seen - removed + size - 1)
      -- ZREM below moves later members up a rank: the next page starts "removed" earlier.
      if #members < size then size = 0 else size = 32 - seen - #members end
      for _, m in ipairs(members) do
        seen = seen + 1
        local pk = string.sub(m, W + 2)
        -- The reply row's fields with the state: the member met is nearly always the one run.
        local f = redis.call('HMGET', P .. 'e:' .. pk, ${FIELDS}, 'state', 'lease', 'leaseUntil', 'okey', 'ostrict')
        if not f[14] or f[14] == 'dead' or f[17] ~= key then
          -- Completed, buried, purged or placed again elsewhere: no longer of this key.
          redis.call('ZREM', O, m)
          removed = removed + 1
        elseif f[15] and f[15] ~= '' and tonumber(f[16]) > now then
          busy = tonumber(f[16])
          decided = true
          break
        else
          -- Never failed (attempts 0): parked, or due now after a lease ended or was handed
          -- back; only a failed one can be waiting for a retry time.
          local score = 0
          if f[9] ~= '0' then score = tonumber(redis.call('ZSCORE', KEYS[1], pk)) or 0 end
          if score < PARK and score > now then
            -- Retrying: a strict head holds the key until then; otherwise later ones pass.
            if not nextAt or score < nextAt then nextAt = score end
            if f[18] == '1' then
              decided = true
              break
            end
          else
            chosen = { pk = pk, order = string.sub(m, 1, W), row = f }
            decided = true
            break
          end
        end
      end
    end
  end
  if busy then
    kd[#kd + 1] = busy
    kd[#kd + 1] = key
  elseif chosen then
    local e = P .. 'e:' .. chosen.pk
    local lease = token .. '.r' .. (#run + 1)
    local row = chosen.row
    row[18] = nil
    row[11] = (tonumber(row[11]) or 0) + 1
    redis.call('HSET', e, 'takes', row[11], 'lease', lease, 'leaseUntil', now + vis)
    heads[#heads + 1] = now + vis
    heads[#heads + 1] = chosen.pk
    if raised then
      redis.call('HSET', H, 'pk', chosen.pk, 'lease', lease, 'order', chosen.order, 'last', last)
    else
      redis.call('HSET', H, 'pk', chosen.pk, 'lease', lease, 'order', chosen.order)
    end
    redis.call('PEXPIRE', H, retention)
    freed = false
    kd[#kd + 1] = now + vis
    kd[#kd + 1] = key
    row[14] = lease
    row[15] = chosen.pk
    row[16] = key
    if last and chosen.order < last then row[17] = 1 else row[17] = 0 end
    run[#run + 1] = row
  elseif nextAt then
    kd[#kd + 1] = nextAt
    kd[#kd + 1] = key
  elseif redis.call('ZCARD', O) == 0 then
    kdGone[#kdGone + 1] = key
  else
    -- Thirty-two members met and none runnable nor waiting: looked at again shortly.
    kd[#kd + 1] = now + 1000
    kd[#kd + 1] = key
  end
  if freed then
    redis.call('HDEL', H, 'pk', 'lease', 'order')
    if raised then redis.call('HSET', H, 'last', last) end
    redis.call('PEXPIRE', H, retention)
  end
end
many('ZADD', KEYS[1], heads)
many('ZADD', KD, kd)
many('ZREM', KD, kdGone)
return { 'run', run }`)

// ARGV: prefix, primary key, lease, retentionMs (the dedupe keys'), the ordering key, chain ('1'
// or '0'), visibilityMs, the key's retention (its holder hash). Completes the head as COMPLETE does
// and, with chain, leases the key's next head to the caller when a take would lease it now: the
// inbox not paused, nothing being placed, nothing due in \`due\` (a delivery unplaced, or placed
// and due again: the take's to look at), the first member of the key still of it, parked (not
// retrying) and no suspect (a hand-out without a result: those run alone, through a take).
// Otherwise the key is freed as the take would free it and looked at now. The next head's lease
// is derived from the completed one, so a repeat (its reply lost) finds the same head. Replies
// { 0 } (not held), { 1 } or { 1, row } (FIELDS, lease, primary key, key, late 0/1, as a take's).
export const COMPLETE_NEXT = sent(`${PRELUDE}${COMPLETE_HELD}
local PARK = ${PARK}
local W = ${ORDER_WIDTH}
local pk, lease, key = ARGV[2], ARGV[3], ARGV[5]
local chain, vis, retention = ARGV[6] == '1', tonumber(ARGV[7]), tonumber(ARGV[8])
local e = P .. 'e:' .. pk
local now = clock()
local O, H, KD = P .. 'o:' .. key, P .. 'oh:' .. key, P .. 'okdue'
local nextLease = 'c' .. redis.sha1hex(lease)
-- A head's reply row, as the take builds it.
local function reply(hpk, order, last, f)
  f[18] = nil
  f[14] = nextLease
  f[15] = hpk
  f[16] = key
  if last and order < last then f[17] = 1 else f[17] = 0 end
  return { 1, f }
end
if not held(e, lease, now) then
  if redis.call('GET', P .. 'k:' .. pk) ~= 'p:' .. lease then return { 0 } end
  -- A repeat: the head the first completion leased, while still held.
  local h = redis.call('HMGET', H, 'pk', 'lease', 'order', 'last')
  if chain and h[2] == nextLease and held(P .. 'e:' .. h[1], nextLease, now) then
    return reply(h[1], h[3], h[4], redis.call('HMGET', P .. 'e:' .. h[1], ${FIELDS}, 'state', 'lease', 'leaseUntil', 'okey', 'ostrict'))
  end
  return { 1 }
end
completeHeld(e, pk, lease)
if not chain then return { 1 } end
-- This delivery is the key's holder (a take or a completion leased it): its order is what a later,
-- older arrival is late against, and its member goes.
local h = redis.call('HMGET', H, 'pk', 'lease', 'last', 'order')
if h[1] ~= pk or h[2] ~= lease or not h[4] then return { 1 } end
local last = h[3]
if not last or h[4] > last then last = h[4] end
redis.call('ZREM', O, h[4] .. '|' .. pk)
local function free()
  redis.call('HDEL', H, 'pk', 'lease', 'order')
  redis.call('HSET', H, 'last', last)
  redis.call('PEXPIRE', H, retention)
  redis.call('ZADD', KD, now, key)
  return { 1 }
end
if redis.call('HGET', P .. 'flow', 'paused') == '1' then return free() end
redis.call('ZREMRANGEBYSCORE', P .. 'placing', '-inf', now)
if redis.call('ZCARD', P .. 'placing') > 0 then return free() end
if #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) > 0 then return free() end
for _, m in ipairs(redis.call('ZRANGE', O, 0, 31)) do
  local hpk = string.sub(m, W + 2)
  local he = P .. 'e:' .. hpk
  local f = redis.call('HMGET', he, ${FIELDS}, 'state', 'lease', 'leaseUntil', 'okey', 'ostrict')
  if not f[14] or f[14] == 'dead' or f[17] ~= key then
    -- Completed, buried, purged or placed again elsewhere: no longer of this key.
    redis.call('ZREM', O, m)
  else
    local score = tonumber(redis.call('ZSCORE', KEYS[1], hpk)) or 0
    local takes = tonumber(f[11]) or 0
    if (f[15] and f[15] ~= '' and tonumber(f[16]) > now) or score < PARK or takes > (tonumber(f[9]) or 0) then return free() end
    local order = string.sub(m, 1, W)
    f[11] = takes + 1
    redis.call('HSET', he, 'takes', f[11], 'lease', nextLease, 'leaseUntil', now + vis)
    redis.call('ZADD', KEYS[1], now + vis, hpk)
    redis.call('HSET', H, 'pk', hpk, 'lease', nextLease, 'order', order, 'last', last)
    redis.call('PEXPIRE', H, retention)
    redis.call('ZADD', KD, now + vis, key)
    return reply(hpk, order, last, f)
  end
end
return free()`)

// ARGV: prefix, then a count of groups and per group: placing lease, strict ('1' or '0'), a count
// and per delivery its key and member `<order>|<primary key>` (PLACE_ALL). Replies 1 or 0 each (0:
// the placing lease was lost), in the order sent.
export const PLACE = sent(`${PRELUDE}${MANY}${FILE}${PLACE_ALL}
return placeAll(2, clock())`)

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

// ARGV: prefix, this worker's mode, the other mode, worker id, ttlMs. Replies 1 (marked) or 0 (a
// worker of the other mode runs: nothing written). One script, so two workers of different modes
// starting at the same moment cannot both be marked.
export const CLAIM_MODE = `${PRELUDE}
local now = clock()
local mine, other = P .. 'mode:' .. ARGV[2], P .. 'mode:' .. ARGV[3]
redis.call('ZREMRANGEBYSCORE', other, '-inf', now)
if redis.call('ZCARD', other) > 0 then return 0 end
local ttl = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', mine, '-inf', now)
redis.call('ZADD', mine, now + ttl, ARGV[4])
redis.call('PEXPIRE', mine, ttl)
return 1`

// ARGV: prefix, mode, worker id.
export const RELEASE_MODE = `redis.call('ZREM', ARGV[1] .. 'mode:' .. ARGV[2], ARGV[3])
return 1`
