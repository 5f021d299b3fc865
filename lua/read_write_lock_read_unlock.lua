-- Read-write lock: release one read hold, idempotent per request (the
-- latch remembers the first result, as reentrant_lock_unlock.lua).
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_rwlock:<tag>"
-- KEYS[3] the caller's read-hold timeouts "<tag>:<owner id>:rwlock_timeout"
-- KEYS[4] <tag>, the prefix of every owner's timeout keys
-- KEYS[5] latch "redisson_unlock_latch:<tag>:<request id>"
-- ARGV[1] unlock message ("0": wake one waiter)
-- ARGV[2] owner id
-- ARGV[3] latch lifetime in ms, negated on the call's first send
--         (lib/unlock_latch.lua)
-- ARGV[4] publish command: PUBLISH or SPUBLISH
-- KEYS[6] (optional, turnstile's own; readers have no identity) the wake
--         registry (lib/read_write_wake.lua): the owner's hold record goes
--         with its last hold, and a release that frees the lock first
--         serves the oldest registration (a writer's process, or every
--         reader's) on their own channels
-- Reply: nil if the owner holds no read lock; 0 if it still holds some; 1
-- once its last read hold is gone (the lock itself may stay, held by
-- others; deleted, the channel is told). Redisson answers 0 while others
-- hold it; the owner's own count is what its client keeps.
-- While others hold it, its ttl follows the longest remaining read hold
-- (a read field none of whose timeout keys is left is dropped: its lease
-- ended, unlike Redisson, which keeps it while any other hold lives);
-- unlike Redisson, it is never shortened below what it was in write mode
-- (a downgrading writer's lease stays whole).
--! include unlock_latch
--! include wake_registry
--! include read_write_wake
local registry = KEYS[6]
local remembered, latch_ms = read_unlock_latch(KEYS[5], ARGV[3])
if remembered ~= nil then
  return remembered
end
-- The path when nobody waits: the one hold of the one reader let go,
-- nobody registered: deleted with its timeout key, the shared channel told.
if sole_hold(KEYS[1], 'read', ARGV[2]) and (registry == nil or redis.call('exists', registry) == 0) then
  redis.call('del', KEYS[1], KEYS[3] .. ':1')
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', latch_ms)
  return 1
end
--! later
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
  rw_released(registry, ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (holds + 1))
-- 1 once the owner's last read hold is gone, whoever else still holds.
local released = 0
if holds == 0 then released = 1 end
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local count = tonumber(redis.call('hget', KEYS[1], field))
    if count ~= nil then
      local own = -3
      for k = count, 1, -1 do
        own = math.max(own, redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k))
      end
      longest = math.max(longest, own)
      -- A read field whose every timeout key is gone outlived its lease
      -- (brought back by a restart that lost its unlock, or a holder that
      -- stopped renewing while others kept the lock): forgotten, or
      -- continuous reads would keep it, and the writers out, for ever.
      if own == -2 and string.sub(field, -6) ~= ':write' then
        redis.call('hdel', KEYS[1], field)
        rw_released(registry, field)
      end
    end
  end
  if mode == 'write' then
    longest = math.max(longest, redis.call('pttl', KEYS[1]))
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    redis.call('set', KEYS[5], released, 'px', latch_ms)
    return released
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], released, 'px', latch_ms)
    return released
  end
end
redis.call('del', KEYS[1])
wake_rw_free(registry, ARGV[4])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', latch_ms)
return 1
