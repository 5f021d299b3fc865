-- Read-write lock: release one write hold, idempotent per request.
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_rwlock:<tag>"
-- KEYS[3] latch "redisson_unlock_latch:<tag>:<request id>"
-- KEYS[4] (optional) the writer's identity (lib/holder_identity.lua)
-- KEYS[5] (optional, only after KEYS[4]) the wake registry
--         (lib/read_write_wake.lua)
-- ARGV[1] unlock message ("1": wake every waiter, readers come in together)
-- ARGV[2] lease in ms, re-armed after a partial unlock (never shortened)
-- ARGV[3] the owner's write field "<owner id>:write"
-- ARGV[4] latch lifetime in ms, negated on the call's first send
--         (lib/unlock_latch.lua)
-- ARGV[5] publish command: PUBLISH or SPUBLISH
-- Reply: nil if the owner holds no write lock; 0 if write holds remain; 1
-- if the last one was released: the lock is deleted and the channel told,
-- or, when the owner still reads (downgrade), it stays in read mode.
-- With KEYS[5], a release that frees the lock first serves the registry's
-- oldest registration (one writer's process, or every reader's) on their
-- own channels, and a downgrade tells the readers' processes; the shared
-- channel hears Redisson's "1" exactly as without it.
--! include unlock_latch
--! include holder_identity
--! include wake_registry
--! include read_write_wake
local registry = KEYS[5]
local remembered, latch_ms = read_unlock_latch(KEYS[3], ARGV[4])
if remembered ~= nil then
  return remembered
end
-- The path when nobody waits: the one hold of the one writer let go,
-- nobody registered: deleted with its identity, the shared channel told.
if sole_hold(KEYS[1], 'write', ARGV[3]) and (registry == nil or redis.call('exists', registry) == 0) then
  delete_with_holder(KEYS[1], KEYS[4])
  redis.call(ARGV[5], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', latch_ms)
  return 1
end
--! later
local mode = redis.call('hget', KEYS[1], 'mode')
-- A lock that is gone (expired, deleted) is not the owner's any more:
-- nil. (Redisson publishes then anyway and latches 1; waiters need no
-- message, they retry at the ttl they were told.)
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  local ttl = math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[2]))
  rearm_holder(KEYS[4], ttl)
  redis.call('pexpire', KEYS[1], ttl)
  redis.call('set', KEYS[3], 0, 'px', latch_ms)
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
forget_holder(KEYS[4])
rw_released(registry, ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  wake_rw_free(registry, ARGV[5])
  redis.call(ARGV[5], KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
  if registry ~= nil then wake_rw_readers(registry, ARGV[5], 's') end
end
redis.call('set', KEYS[3], 1, 'px', latch_ms)
return 1
