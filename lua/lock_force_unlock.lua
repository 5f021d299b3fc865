-- Any lock: delete it whoever holds it, and wake its waiters.
-- KEYS[1] lock key
-- KEYS[2] wake-up channel
-- ARGV[1] unlock message
-- ARGV[2] the type a lock of this flavor has ('hash' reentrant/fair, 'string' token)
-- ARGV[3] publish command: PUBLISH or SPUBLISH (Backend::publish_command())
-- KEYS[3] (optional) turnstile's wake registry (lib/wake_registry.lua): one
--         registered process is woken on its own channel as well
-- Reply: 1 if a lock was deleted, 0 if there was none. A key that is not a
-- lock of this flavor, by type or by shape (lib/lock_shape.lua: a hash's
-- every value a hold count and every owner "<uuid>:..."), is refused
-- (WRONGTYPE) and left alone: force-unlocking a lock name must never delete
-- unrelated data.
--! include lock_shape
--! include wake_registry
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
if KEYS[3] ~= nil then
  wake_registered(KEYS[3], ARGV[3])
end
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
