-- Reentrant lock: release one hold (Redisson RLock layout), idempotent per
-- request: the first result is remembered in a short-lived latch key, so a
-- retry after a lost reply does not decrement twice.
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_lock__channel:{<name>}"
-- KEYS[3] latch "redisson_unlock_latch:{<name>}:<request id>"
-- ARGV[1] unlock message ("0": wake one waiter)
-- ARGV[2] lease in ms, re-armed after a partial unlock
-- ARGV[3] owner id
-- ARGV[4] latch lifetime in ms, negated on the call's first send
--         (lib/unlock_latch.lua)
-- ARGV[5] publish command: PUBLISH, or SPUBLISH on a cluster with sharded
--         pub/sub (Backend::publish_command(), as Redisson passes it)
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[4] the holder's identity (lib/holder_identity.lua)
-- KEYS[5] (only after KEYS[4]) the wake registry (lib/wake_registry.lua)
-- KEYS[6] (only after KEYS[5]) the grants (lib/wake_registry.lua, direct
--         handoff): a release that frees the lock grants it to the oldest
--         registered process's offer
-- ARGV[6] with KEYS[6]: the caller's wall clock in ms (a granted process
--         with other waiters is registered again at it)
-- Reply: nil if the owner does not hold the lock; 0 if holds remain; 1 if
-- the lock was released: one registered turnstile process woken (or
-- granted the lock, with KEYS[6]) on its own channel (with KEYS[5]), and
-- "0" on the shared channel, always (Redisson's
-- waiters listen there; turnstile's only while a foreign holder held it).
--! include unlock_latch
--! include holder_identity
--! include wake_registry
local identity, registry, grants = KEYS[4], KEYS[5], KEYS[6]
local remembered, latch_ms = read_unlock_latch(KEYS[3], ARGV[4])
if remembered ~= nil then
  return remembered
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if count == nil then
  return nil
end
-- The path when nobody waits: the last hold let go, nobody registered and
-- no grant left (nothing to settle there).
if count == 1 and (registry == nil or redis.call('exists', registry, grants or registry) == 0) then
  delete_with_holder(KEYS[1], identity)
  redis.call(ARGV[5], KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', latch_ms)
  return 1
end
--! later
if count > 1 then
  redis.call('hincrby', KEYS[1], ARGV[3], -1)
  rearm_holder(identity, ARGV[2])
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', latch_ms)
  return 0
end
delete_with_holder(KEYS[1], identity)
-- A last hold here found processes registered or a grant left (above).
if registry ~= nil and (count == 1 or redis.call('exists', registry, grants or registry) > 0) then
  if grants ~= nil then redis.call('hdel', grants, ARGV[3]) end
  grant_or_wake(registry, grants, KEYS[1], identity, ARGV[5], ARGV[6])
end
redis.call(ARGV[5], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', latch_ms)
return 1
