/**
 * The Lua scripts of the Redis idempotency store and secret source, one per operation, as BullMQ
 * keeps each in `commands/*.lua`. (The inbox's are in src/inbox/redis-scripts.ts.)
 */

// Values: `c:<owner>` while claimed (the key expires with the lease), `d:<owner>` once completed
// (expires with the retention window). A repeated call by the same owner gets the same answer,
// so an operation whose reply was lost in a reconnect can be sent again safely.
export const CLAIM = `local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'c:' .. ARGV[1], 'PX', ARGV[2])
  return 'claimed'
end
if v == 'c:' .. ARGV[1] then return 'claimed' end
if string.sub(v, 1, 2) == 'd:' then return 'completed' end
return 'in_flight'`

export const COMPLETE = `local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], 'd:' .. ARGV[1], 'PX', ARGV[2])
if v == 'c:' .. ARGV[1] or v == 'd:' .. ARGV[1] then return 1 end
return 0`

export const RELEASE = `if redis.call('GET', KEYS[1]) == 'c:' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`

/** The secret source's read: the state's JSON, or nil. */
export const GET_SECRET = `return redis.call('GET', KEYS[1])`

/**
 * The secret source's write: checked and set in one script, so no other writer comes between.
 * The stored JSON starts with its version (`{"version":N,...`), read here without a JSON parser;
 * a state stored without one (an earlier version, or by hand) is version 0. ARGV[1] is the state's
 * JSON without a version, ARGV[2] the version the writer read ('' for an unconditional write),
 * ARGV[3] the version this write already stored on an attempt whose replicas did not confirm it
 * ('' on the first): still stored, it is answered as is, so a retry waits again for the replicas
 * instead of writing a new version. Answers the new version, or -1 when the stored one is not the one given.
 */
export const SET_SECRET = `local current = redis.call('GET', KEYS[1])
local version = 0
if current then version = tonumber(string.match(current, '^{"version":(%d+),')) or 0 end
if ARGV[3] and ARGV[3] ~= '' and tonumber(ARGV[3]) == version then return version end
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= version then return -1 end
redis.call('SET', KEYS[1], '{"version":' .. (version + 1) .. ',' .. string.sub(ARGV[1], 2))
return version + 1`
