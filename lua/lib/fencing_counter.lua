-- Shared: draws the next fencing token from a lock's counter
-- "redisson_lock_token:{<name>}" (Redisson's RFencedLock key: INCR, no
-- TTL), included by the fenced acquisitions. A missing counter (a server
-- restarted without persistence, an eviction, a first use: its INCR
-- answers 1) is set to the server's clock in microseconds plus one, so
-- that tokens keep rising across the loss of the counter (without the
-- floor they would start again at 1). Assumes fewer than one token per
-- microsecond on average since the previous floor (Redis serves well under
-- that on one key) and a server clock that does not step back across the
-- loss. Redisson's own INCR keeps working on the same key; a Redisson
-- client that draws first from a missing counter still starts it at 1.
-- Returns the token, or TIME's refusal (an ACL may refuse it) as an error
-- reply for the script to return, the counter left missing: nothing
-- written.
local function next_fencing_token(counter)
  local token = redis.call('incr', counter)
  if token ~= 1 then return token end
  local now = redis.pcall('time')
  if now.err ~= nil then
    redis.call('del', counter)
    return now
  end
  -- Exact: microseconds since 1970 stay far below 2^53 until the year 2255.
  token = tonumber(now[1]) * 1000000 + tonumber(now[2]) + 1
  redis.call('set', counter, string.format('%d', token))
  return token
end
