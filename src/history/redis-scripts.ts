/**
 * The Lua scripts of `RedisHistory` (redis.ts), one per operation, each one `EVAL` round trip
 * with KEYS[1] the index and ARGV[1] the tagged prefix (keys.ts): every key a script touches is
 * built from that prefix, so all of them hash to one Cluster slot.
 *
 * Keys: `P i` orders members (keys.ts) by receivedAt. `P e` is a hash of member → entry: the
 * JSON of its HistoryEntry in short names (redis.ts `Stored`), without the id and the endpoint
 * its member holds, and without the body. `P b` is a hash of member → kept body. `P ep` orders
 * endpoint heads (`<length>:<endpoint>:`) by their latest record, for `get(id)` without an
 * endpoint. Refusals: `P r:<window>` (code → count), `P ri:<window>` (code → JSON ids), `P rw`
 * (the windows).
 *
 * Built for a batch of new entries, nearly every batch the receiver sends: one `ZADD NX` of the
 * batch's members says they are all new, and one `HSET` then writes them all, the entries passed
 * on as the client laid them out, with nothing decoded in the script. No key and
 * no TTL per entry: each write trims the index of the expired and of the oldest past
 * `maxEntries`, with their fields, and sets the four keys' TTL to the retention, so a history
 * nobody writes to any more goes too; reads skip what is past the retention and not trimmed
 * yet. No id → member map: an id's entries are looked up under each endpoint written within the
 * retention, a few reads for a rare call where the map cost a write per entry. On the benchmark
 * machine (bench/history-cost.mjs) Redis spends 3 to 4 µs of CPU per recorded delivery with this
 * layout, 8 to 9 µs with one string key per entry (`SET NX PX`) and an id map.
 */

/** Fixed ARGV of WRITE before the records. */
export const WRITE_FIXED = 10

/** Flag bits of a record in WRITE's flags argument, added to 64 to make one character per record. */
export const FLAG = { soft: 1, setAttempts: 2, addAttempt: 4, clearError: 8 } as const

// ARGV: P, now, retentionMs, maxEntries, refusalRetentionMs, refusals (JSON), record count n,
// body count, endpoint head count, flags (one character per record, 64 + FLAG bits), then: n
// pairs member, entry JSON, as HSET takes them; the n receivedAt; a pair member, body per kept
// body (HSET); a pair time, head per endpoint (ZADD). The entry JSON is the record applied to no
// entry (mergeRecord in merge.ts, built by the client), written as is when the member is new.
// When it exists, the same JSON is the change, and the flags say which of its fields are
// relative: soft (the outcome only on a new entry), setAttempts (attempts set, not added),
// addAttempt (one attempt added), clearError; the rules are merge.ts's.
export const WRITE = `local P = ARGV[1]
local now = tonumber(ARGV[2])
local ret = ARGV[3]
local max = tonumber(ARGV[4])
local rret = tonumber(ARGV[5])
local n = tonumber(ARGV[7])
local flags = ARGV[10]
local E, B, EP = P .. 'e', P .. 'b', P .. 'ep'
local a = ${WRITE_FIXED} + 1
local s = a + 2 * n
local b = s + n
local h = b + 2 * tonumber(ARGV[8])
local z = h + 2 * tonumber(ARGV[9])
-- New members get their first record's receivedAt; when all of them are new, the entries are the records.
-- The members are sent once: a loop here costs less than each argument sent twice.
local scored = {}
for i = 1, n do
  scored[2 * i - 1] = ARGV[s + i - 1]
  scored[2 * i] = ARGV[a + 2 * i - 2]
end
if n > 0 and redis.call('ZADD', KEYS[1], 'NX', unpack(scored)) < n then
  local members = {}
  for i = 1, n do members[i] = ARGV[a + 2 * i - 2] end
  local lowered = {}
  local found = redis.call('HMGET', E, unpack(members))
  -- An entry changed by several records of the batch is decoded once and written once.
  local cur, order = {}, {}
  for i = 1, n do
    local m = members[i]
    local e = cur[m]
    if e == nil then
      e = found[i]
      order[#order + 1] = m
    end
    if not e then
      cur[m] = ARGV[a + 2 * i - 1]
    else
      if type(e) == 'string' then e = cjson.decode(e) end
      local r = cjson.decode(ARGV[a + 2 * i - 1])
      local f = flags:byte(i) - 64
      local at = r.r
      -- Absent, updatedAt is receivedAt: made explicit before receivedAt can change.
      e.u = e.u or e.r
      -- A late record (another process's, landing out of order) never replaces a newer outcome.
      local late = at < e.u
      if at < e.r then
        e.r = at
        lowered[#lowered + 1] = at
        lowered[#lowered + 1] = m
      end
      if at > e.u then e.u = at end
      if r.t then e.t = r.t end
      e.d = e.d + r.d
      if bit.band(f, ${FLAG.soft}) == 0 and not late then
        e.o = r.o
        if r.s then e.s = r.s end
        if r.c then e.c = r.c elseif r.s then e.c = nil end
      end
      if bit.band(f, ${FLAG.setAttempts}) ~= 0 then e.a = r.a
      elseif bit.band(f, ${FLAG.addAttempt}) ~= 0 then e.a = e.a + 1 end
      if r.pa then e.pa = at end
      if bit.band(f, ${FLAG.clearError}) ~= 0 then
        e.en = nil
        e.em = nil
      elseif r.en then
        e.en = r.en
        e.em = r.em
      end
      if r.h then
        e.h = true
        e.br = r.br
      end
      if r.p then
        e.p = (e.p or 0) + 1
        e.ra = at
      end
      cur[m] = e
    end
  end
  local fields = {}
  for _, m in ipairs(order) do
    local e = cur[m]
    fields[#fields + 1] = m
    fields[#fields + 1] = type(e) == 'string' and e or cjson.encode(e)
  end
  redis.call('HSET', E, unpack(fields))
  if #lowered > 0 then redis.call('ZADD', KEYS[1], unpack(lowered)) end
elseif n > 0 then
  redis.call('HSET', E, unpack(ARGV, a, s - 1))
end
if h > b then redis.call('HSET', B, unpack(ARGV, b, h - 1)) end
if z > h then redis.call('ZADD', EP, unpack(ARGV, h, z - 1)) end
-- Self-maintaining, with bounded work per call: the expired first, then the oldest past the bound.
local function drop(members)
  if #members == 0 then return end
  redis.call('ZREM', KEYS[1], unpack(members))
  redis.call('HDEL', E, unpack(members))
  redis.call('HDEL', B, unpack(members))
end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ret)), 'LIMIT', 0, 1000))
local over = redis.call('ZCARD', KEYS[1]) - max
if over > 0 then drop(redis.call('ZRANGE', KEYS[1], 0, math.min(over, 1000) - 1)) end
if z > h then
  redis.call('ZREMRANGEBYSCORE', EP, '-inf', '(' .. (now - tonumber(ret)))
  for _, k in ipairs({ KEYS[1], E, B, EP }) do redis.call('PEXPIRE', k, ret) end
end
local windows = cjson.decode(ARGV[6])
for _, w in ipairs(windows) do
  local rk = P .. 'r:' .. w.w
  local ik = P .. 'ri:' .. w.w
  redis.call('HINCRBY', rk, w.code, w.n)
  local ids = cjson.decode(redis.call('HGET', ik, w.code) or '[]')
  local seen = {}
  for _, id in ipairs(ids) do seen[id] = true end
  for _, id in ipairs(w.ids) do
    if #ids < 10 and not seen[id] then
      ids[#ids + 1] = id
      seen[id] = true
    end
  end
  redis.call('HSET', ik, w.code, cjson.encode(ids))
  redis.call('PEXPIRE', rk, rret)
  redis.call('PEXPIRE', ik, rret)
  redis.call('ZADD', P .. 'rw', w.w, w.w)
end
redis.call('ZREMRANGEBYSCORE', P .. 'rw', '-inf', '(' .. (now - rret))
return 1`

// ARGV: P, max score (inclusive), min score (inclusive), cursor member ('' for none), limit,
// endpoint member prefix ('' for any), outcome ('' for any), most members looked at. Replies
// { member and entry JSON of each row, last scanned member and score (or nothing when the index
// ran out) }. An entry is decoded only to filter by outcome; the endpoint is the member's head.
export const LIST = `local P = ARGV[1]
local maxs = ARGV[2]
local mins = ARGV[3]
local after = ARGV[4]
local limit = tonumber(ARGV[5])
local ep = ARGV[6]
local oc = ARGV[7]
local cap = tonumber(ARGV[8])
local rows = {}
local scanned = 0
local offset = 0
local lastm, lasts = '', ''
local skipping = after ~= ''
while scanned < cap do
  local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], maxs, mins, 'WITHSCORES', 'LIMIT', offset, 200)
  if #page == 0 then return { rows, '', '' } end
  offset = offset + #page / 2
  for i = 1, #page, 2 do
    local m, s = page[i], page[i + 1]
    if skipping then
      if not (s == maxs and m >= after) then skipping = false end
    end
    if not skipping then
      scanned = scanned + 1
      lastm, lasts = m, s
      if ep == '' or m:sub(1, #ep) == ep then
        local f = redis.call('HGET', P .. 'e', m)
        if f and (oc == '' or cjson.decode(f).o == oc) then
          rows[#rows + 1] = m
          rows[#rows + 1] = f
          if #rows >= limit then return { rows, lastm, lasts } end
        end
      end
      if scanned >= cap then break end
    end
  end
end
return { rows, lastm, lasts }`

// ARGV: P, member ('' to look the id up), id, oldest receivedAt kept. Replies { member, entry
// JSON, body } (the body false when none is kept), or an empty list. Without a member, the id's
// entry under each endpoint written since the oldest kept is looked up, and the one received last
// answers.
export const GET = `local P = ARGV[1]
local E = P .. 'e'
local m = ARGV[2]
local f
if m == '' then
  local latest
  for _, head in ipairs(redis.call('ZRANGEBYSCORE', P .. 'ep', ARGV[4], '+inf')) do
    local found = redis.call('HGET', E, head .. ARGV[3])
    if found then
      local at = cjson.decode(found).r
      if not f or at > latest then f, latest, m = found, at, head .. ARGV[3] end
    end
  end
else
  f = redis.call('HGET', E, m)
end
if not f then return {} end
return { m, f, redis.call('HGET', P .. 'b', m) }`

// ARGV: P, since. Replies { window, HGETALL counts, HGETALL ids } per window, newest first.
export const REFUSALS = `local P = ARGV[1]
local out = {}
local ws = redis.call('ZREVRANGEBYSCORE', P .. 'rw', '+inf', ARGV[2], 'LIMIT', 0, 1440)
for _, w in ipairs(ws) do
  out[#out + 1] = { w, redis.call('HGETALL', P .. 'r:' .. w), redis.call('HGETALL', P .. 'ri:' .. w) }
end
return out`

export const SIZE = `return redis.call('ZCARD', KEYS[1])`
