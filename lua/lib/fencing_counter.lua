-- Shared: draws the next fencing token from a lock's counter
-- "redisson_lock_token:{<name>}" (Redisson's RFencedLock key: an integer,
-- no TTL), included by the fenced acquisitions. Every token is floored by
-- the server's clock in microseconds: the token is the larger of the
-- counter plus one and TIME plus one, and the counter is left at it. So
-- tokens keep rising whatever happened to the counter: missing (a server
-- restarted without persistence, an eviction, a first use) or stale (a
-- node restarted from an older append-only file, a replica promoted
-- without the latest increments: found by the real-server histories,
-- tests/histories/, where a Sentinel master restarted from its AOF handed
-- out tokens 0.79 s of microseconds below ones already used). Assumes
-- fewer than one token per microsecond on average (Redis serves well
-- under that on one key) and server clocks that do not step back between
-- the nodes that serve the name. Two commands: TIME, and one SET that
-- writes the floor and reads the counter (GET, Redis 6.2 and later); a
-- second SET only when the counter was already at the floor or beyond
-- (more than one token in a microsecond, a clock behind). Redisson's own
-- INCR keeps working on the same key.
-- Returns the token, or an error reply for the script to return, nothing
-- written: TIME's refusal (an ACL may refuse it), or a counter that is not
-- an integer (someone else's value, put back as it was, with its TTL).
local function next_fencing_token(counter)
  local now = redis.pcall('time')
  if now.err ~= nil then
    return now
  end
  -- Exact: microseconds since 1970 stay far below 2^53 until the year 2255.
  local token = tonumber(now[1]) * 1000000 + tonumber(now[2]) + 1
  local previous = redis.call('set', counter, string.format('%d', token), 'keepttl', 'get')
  if previous == false then
    return token
  end
  local count = tonumber(previous)
  if count == nil or count ~= math.floor(count) then
    redis.call('set', counter, previous, 'keepttl')
    return {err = 'ERR the fencing counter ' .. counter .. ' holds a value that is not an integer'}
  end
  if count >= token then
    token = count + 1
    redis.call('set', counter, string.format('%d', token), 'keepttl')
  end
  return token
end
