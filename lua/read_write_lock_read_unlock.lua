-- Read-write lock: release one read hold, idempotent per request (the
-- latch remembers the first result, as reentrant_lock_unlock.lua).
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_rwlock:<tag>"
-- KEYS[3] the caller's read-hold timeouts "<tag>:<owner id>:rwlock_timeout"
-- KEYS[4] <tag>, the prefix of every owner's timeout keys
-- KEYS[5] latch "redisson_unlock_latch:<tag>:<request id>"
-- ARGV[1] unlock message ("0": wake one waiter)
-- ARGV[2] owner id
-- ARGV[3] latch lifetime in ms
-- ARGV[4] publish command: PUBLISH or SPUBLISH
-- Reply: nil if the owner holds no read lock; 0 if the lock is still held
-- (by it or others); 1 if the lock was released (and the channel told).
-- While others hold it, its ttl follows the longest remaining read hold;
-- unlike Redisson, it is never shortened below what it was in write mode
-- (a downgrading writer's lease stays whole).
local remembered = redis.call('get', KEYS[5])
if remembered ~= false then
  return tonumber(remembered)
end
local mode = redis.call('hget', KEYS[1], 'mode')
-- A lock that is gone (expired, deleted) is not the owner's any more:
-- nil. (Redisson publishes then anyway and latches 1; waiters need no
-- message, they retry at the ttl they were told.)
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local holds = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if holds == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (holds + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local count = tonumber(redis.call('hget', KEYS[1], field))
    if count ~= nil then
      for k = count, 1, -1 do
        longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k))
      end
    end
  end
  if mode == 'write' then
    longest = math.max(longest, redis.call('pttl', KEYS[1]))
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[3])
return 1
