/**
 * The Lua scripts of `RedisHistory` (redis.ts), one per operation, each one `EVAL` round trip
 * with KEYS[1] the index and ARGV[1] the tagged prefix (keys.ts): every key a script touches is
 * built from that prefix, so all of them hash to one Cluster slot.
 *
 * An entry is a hash `P e:<member>`; `P idx` orders members by receivedAt; `P ids` maps an id to
 * its latest member (for `get(id)` without an endpoint). Refusals: `P r:<window>` (code → count),
 * `P ri:<window>` (code → JSON ids), `P rw` (the windows).
 */

// ARGV: P, now, retentionMs, maxEntries, refusalRetentionMs, records (JSON), refusals (JSON).
// A record's fields: m (member), id, ep, at, o (outcome), soft, t (type), s (status), c (code),
// a (attempts, set), aa (add one), d (delivered), p (processed), en/em (error), clr (clear the
// error), b/br (body, redacted), rp (replay). The rules are merge.ts's.
export const WRITE = `local P = ARGV[1]
local now = tonumber(ARGV[2])
local ret = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local rret = tonumber(ARGV[5])
-- One HMGET to read, one HSET to write each entry: a few calls per record, whatever it changes.
for _, r in ipairs(cjson.decode(ARGV[6])) do
  local e = P .. 'e:' .. r.m
  local f = redis.call('HMGET', e, 'updatedAt', 'receivedAt', 'attempts', 'deliveries', 'replays')
  local fresh = not f[1]
  local late = false
  local set, del = {}, {}
  local function put(k, v)
    set[#set + 1] = k
    set[#set + 1] = v
  end
  if fresh then
    put('id', r.id)
    put('endpoint', r.ep)
    put('receivedAt', r.at)
    put('updatedAt', r.at)
    redis.call('ZADD', KEYS[1], r.at, r.m)
    redis.call('HSET', P .. 'ids', r.id, r.m)
  else
    late = r.at < tonumber(f[1])
    if not late then put('updatedAt', r.at) end
    if r.at < tonumber(f[2] or 0) then
      put('receivedAt', r.at)
      redis.call('ZADD', KEYS[1], r.at, r.m)
    end
  end
  local attempts = tonumber(f[3] or 0)
  if r.a then attempts = r.a end
  if r.aa then attempts = attempts + 1 end
  if fresh or r.a or r.aa then put('attempts', attempts) end
  if fresh or r.d then put('deliveries', tonumber(f[4] or 0) + (r.d and 1 or 0)) end
  if fresh or r.rp then put('replays', tonumber(f[5] or 0) + (r.rp and 1 or 0)) end
  if r.rp then put('replayedAt', r.at) end
  if r.t then put('eventType', r.t) end
  if fresh or not (r.soft or late) then
    put('outcome', r.o)
    if r.s then put('status', r.s) end
    if r.c then put('code', r.c) elseif r.s and not fresh then del[#del + 1] = 'code' end
  end
  if r.p then put('processedAt', r.at) end
  if r.clr then
    if not fresh then
      del[#del + 1] = 'errorName'
      del[#del + 1] = 'errorMessage'
    end
  elseif r.en then
    put('errorName', r.en)
    put('errorMessage', r.em)
  end
  if r.b then
    put('body', r.b)
    if r.br then put('bodyRedacted', 1) elseif not fresh then del[#del + 1] = 'bodyRedacted' end
  end
  if #set > 0 then redis.call('HSET', e, unpack(set)) end
  if #del > 0 then redis.call('HDEL', e, unpack(del)) end
  redis.call('PEXPIRE', e, ret)
end
-- Self-maintaining, with bounded work per call: the expired first, then the oldest past the bound.
local function drop(members)
  for _, m in ipairs(members) do
    local e = P .. 'e:' .. m
    local id = redis.call('HGET', e, 'id')
    redis.call('DEL', e)
    redis.call('ZREM', KEYS[1], m)
    if id and redis.call('HGET', P .. 'ids', id) == m then redis.call('HDEL', P .. 'ids', id) end
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ret), 'LIMIT', 0, 1000))
local over = redis.call('ZCARD', KEYS[1]) - max
if over > 0 then drop(redis.call('ZRANGE', KEYS[1], 0, math.min(over, 1000) - 1)) end
for _, w in ipairs(cjson.decode(ARGV[7])) do
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

/** The fields a listed entry is read with (no body: pages never carry one). */
const LIST_FIELDS = `'id', 'endpoint', 'eventType', 'receivedAt', 'processedAt', 'updatedAt', 'outcome', 'status', 'code', 'attempts', 'deliveries', 'errorName', 'errorMessage', 'replays', 'replayedAt', 'bodyRedacted'`
export const LIST_FIELD_NAMES = ['id', 'endpoint', 'eventType', 'receivedAt', 'processedAt', 'updatedAt', 'outcome', 'status', 'code', 'attempts', 'deliveries', 'errorName', 'errorMessage', 'replays', 'replayedAt', 'bodyRedacted'] as const

// ARGV: P, max score (inclusive), min score (inclusive), cursor member ('' for none), limit,
// endpoint ('' for any), outcome ('' for any), most members looked at. Replies { rows, last
// scanned member and score (or nothing when the index ran out) }; each row LIST_FIELDS then hasBody.
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
      local e = P .. 'e:' .. m
      local f = redis.call('HMGET', e, ${LIST_FIELDS})
      if f[1] and (ep == '' or f[2] == ep) and (oc == '' or f[7] == oc) then
        f[#f + 1] = redis.call('HEXISTS', e, 'body')
        rows[#rows + 1] = f
        if #rows >= limit then return { rows, lastm, lasts } end
      end
      if scanned >= cap then break end
    end
  end
end
return { rows, lastm, lasts }`

// ARGV: P, member ('' to look the id up), id. Replies the entry's HGETALL, or an empty list.
export const GET = `local P = ARGV[1]
local m = ARGV[2]
if m == '' then m = redis.call('HGET', P .. 'ids', ARGV[3]) end
if not m then return {} end
return redis.call('HGETALL', P .. 'e:' .. m)`

// ARGV: P, since. Replies { window, HGETALL counts, HGETALL ids } per window, newest first.
export const REFUSALS = `local P = ARGV[1]
local out = {}
local ws = redis.call('ZREVRANGEBYSCORE', P .. 'rw', '+inf', ARGV[2], 'LIMIT', 0, 1440)
for _, w in ipairs(ws) do
  out[#out + 1] = { w, redis.call('HGETALL', P .. 'r:' .. w), redis.call('HGETALL', P .. 'ri:' .. w) }
end
return out`

export const SIZE = `return redis.call('ZCARD', KEYS[1])`
