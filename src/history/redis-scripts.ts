/**
 * The Lua scripts of `RedisHistory` (redis.ts), one per operation, each one `EVAL` round trip
 * with KEYS[1] the index and ARGV[1] the tagged prefix (keys.ts): every key a script touches is
 * built from that prefix, so all of them hash to one Cluster slot.
 *
 * An entry is one string `P e:<member>`, the JSON of its HistoryEntry without the body; a kept
 * body is the string `P b:<member>`. `P idx` orders members by receivedAt; `P ids` maps an id to
 * its latest member (for `get(id)` without an endpoint). Refusals: `P r:<window>` (code → count),
 * `P ri:<window>` (code → JSON ids), `P rw` (the windows).
 *
 * One string per entry rather than a hash field per attribute: a new entry, nearly every record
 * the receiver makes, is then one `SET NX` the client built, with no read and no decoding on the
 * server; a hash cost a read, a 14-field write and a decode of every record, twice the server's
 * CPU per delivery, and the server shares the machine with the receiver.
 */

/** Fixed ARGV of WRITE before the records. */
export const WRITE_FIXED = 7

// ARGV: P, now, retentionMs, maxEntries, refusalRetentionMs, refusals (JSON), record count, then
// per record: `<at> <flags> <the id's length in bytes> <member>`, the entry JSON, and the body
// when the flags hold b. The
// entry JSON is the record applied to no entry (mergeRecord in merge.ts, built by the client),
// written as is when the member is new. When it exists, the same JSON is the change, and the
// flags say which of its fields are relative: s (soft: the outcome only on a new entry), a
// (attempts set, not added), i (one attempt added), c (the error cleared); the rules are merge.ts's.
// Few arguments per record on purpose: each costs the client more than a longer one.
export const WRITE = `local P = ARGV[1]
local now = tonumber(ARGV[2])
local ret = ARGV[3]
local max = tonumber(ARGV[4])
local rret = tonumber(ARGV[5])
local n = tonumber(ARGV[7])
-- The new entries' index and id writes go in one ZADD and one HSET for the batch, not one each.
local scored, named = {}, {}
local o = ${WRITE_FIXED} + 1
for _ = 1, n do
  local at, flags, idlen, m = ARGV[o]:match('^(%S+) (%a*) (%d+) (.*)$')
  local json = ARGV[o + 1]
  local body
  o = o + 2
  if flags:find('b', 1, true) then
    body = ARGV[o]
    o = o + 1
  end
  local e = P .. 'e:' .. m
  if redis.call('SET', e, json, 'NX', 'PX', ret) then
    scored[#scored + 1] = at
    scored[#scored + 1] = m
    named[#named + 1] = m:sub(-tonumber(idlen))
    named[#named + 1] = m
  else
    local cur = cjson.decode(redis.call('GET', e))
    local r = cjson.decode(json)
    at = r.updatedAt
    -- A late record (another process's, landing out of order) never replaces a newer outcome.
    local late = at < cur.updatedAt
    if at < cur.receivedAt then
      cur.receivedAt = at
      -- In the batch's ZADD, after this member's own if it is new in this batch: the last score wins.
      scored[#scored + 1] = at
      scored[#scored + 1] = m
    end
    if at > cur.updatedAt then cur.updatedAt = at end
    if r.eventType then cur.eventType = r.eventType end
    cur.deliveries = cur.deliveries + r.deliveries
    if not (flags:find('s', 1, true) or late) then
      cur.outcome = r.outcome
      if r.status then cur.status = r.status end
      if r.code then cur.code = r.code elseif r.status then cur.code = nil end
    end
    if flags:find('a', 1, true) then cur.attempts = r.attempts
    elseif flags:find('i', 1, true) then cur.attempts = cur.attempts + 1 end
    if r.processedAt then cur.processedAt = at end
    if flags:find('c', 1, true) then
      cur.errorName = nil
      cur.errorMessage = nil
    elseif r.errorName then
      cur.errorName = r.errorName
      cur.errorMessage = r.errorMessage
    end
    if body then
      cur.hasBody = true
      cur.bodyRedacted = r.bodyRedacted
    end
    if r.replays > 0 then
      cur.replays = cur.replays + 1
      cur.replayedAt = at
    end
    redis.call('SET', e, cjson.encode(cur), 'PX', ret)
    if cur.hasBody and not body then redis.call('PEXPIRE', P .. 'b:' .. m, ret) end
  end
  if body then redis.call('SET', P .. 'b:' .. m, body, 'PX', ret) end
end
if #scored > 0 then redis.call('ZADD', KEYS[1], unpack(scored)) end
if #named > 0 then redis.call('HSET', P .. 'ids', unpack(named)) end
-- Self-maintaining, with bounded work per call: the expired first, then the oldest past the bound.
local function drop(members)
  for _, m in ipairs(members) do
    local e = P .. 'e:' .. m
    local f = redis.call('GET', e)
    redis.call('DEL', e, P .. 'b:' .. m)
    redis.call('ZREM', KEYS[1], m)
    if f then
      local id = cjson.decode(f).id
      if redis.call('HGET', P .. 'ids', id) == m then redis.call('HDEL', P .. 'ids', id) end
    end
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ret)), 'LIMIT', 0, 1000))
local over = redis.call('ZCARD', KEYS[1]) - max
if over > 0 then drop(redis.call('ZRANGE', KEYS[1], 0, math.min(over, 1000) - 1)) end
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
// { entries (JSON), last scanned member and score (or nothing when the index ran out) }. An
// entry is decoded only to filter by outcome; the endpoint is the member's head.
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
        local f = redis.call('GET', P .. 'e:' .. m)
        if f and (oc == '' or cjson.decode(f).outcome == oc) then
          rows[#rows + 1] = f
          if #rows >= limit then return { rows, lastm, lasts } end
        end
      end
      if scanned >= cap then break end
    end
  end
end
return { rows, lastm, lasts }`

// ARGV: P, member ('' to look the id up), id. Replies { entry JSON, body } (the body false when
// none is kept), or an empty list.
export const GET = `local P = ARGV[1]
local m = ARGV[2]
if m == '' then m = redis.call('HGET', P .. 'ids', ARGV[3]) end
if not m then return {} end
local f = redis.call('GET', P .. 'e:' .. m)
if not f then return {} end
return { f, redis.call('GET', P .. 'b:' .. m) }`

// ARGV: P, since. Replies { window, HGETALL counts, HGETALL ids } per window, newest first.
export const REFUSALS = `local P = ARGV[1]
local out = {}
local ws = redis.call('ZREVRANGEBYSCORE', P .. 'rw', '+inf', ARGV[2], 'LIMIT', 0, 1440)
for _, w in ipairs(ws) do
  out[#out + 1] = { w, redis.call('HGETALL', P .. 'r:' .. w), redis.call('HGETALL', P .. 'ri:' .. w) }
end
return out`

export const SIZE = `return redis.call('ZCARD', KEYS[1])`
