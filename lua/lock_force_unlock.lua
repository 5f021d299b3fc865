-- Any lock: delete it whoever holds it, and wake its waiters.
-- KEYS[1] lock key
-- KEYS[2] wake-up channel
-- ARGV[1] unlock message
-- ARGV[2] the type a lock of this flavor has ('hash' reentrant/fair, 'string' token)
-- ARGV[3] publish command: PUBLISH or SPUBLISH (Backend::publish_command())
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[3] the holder's identity, deleted too (lib/holder_identity.lua)
-- KEYS[4] (only after KEYS[3]) the wake registry (lib/wake_registry.lua):
--         one registered process is woken on its own channel as well
-- Reply: 1 if a lock was deleted, 0 if there was none. A key that is not a
-- lock of this flavor, by type or by shape (lib/lock_shape.lua: a hash's
-- every value a hold count and every owner "<uuid>:..."), is refused
-- (WRONGTYPE) and left alone: force-unlocking a lock name must never delete
-- unrelated data.
--! include lock_shape
--! include holder_identity
--! include wake_registry
local identity, registry = KEYS[3], KEYS[4]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= ARGV[2] then
  return not_a_lock(KEYS[1], kind)
end
if (kind == 'hash' and not is_lock_hash(KEYS[1])) or (kind == 'string' and not is_lock_token(KEYS[1])) then
  return not_a_lock(KEYS[1], kind)
end
redis.call('del', KEYS[1])
forget_holder(identity)
if registry ~= nil then
  wake_registered(registry, ARGV[3])
end
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
