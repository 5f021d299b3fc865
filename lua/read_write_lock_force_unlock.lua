-- Read-write lock: delete it whoever holds it, and wake every waiter.
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_rwlock:<tag>"
-- KEYS[3] (optional) the writer's identity, deleted too (lib/holder_identity.lua)
-- KEYS[4] (optional, only after KEYS[3]) the wake registry
--         (lib/read_write_wake.lua): its oldest registration is served
-- ARGV[1] the mode it must be in: 'read', 'write' (Redisson's halves), or
--         'any' (the whole lock)
-- ARGV[2] publish command: PUBLISH or SPUBLISH
-- Reply: 1 if a lock was deleted, 0 if there was none (or in the other
-- mode). Read holds' timeout keys are left to expire, as Redisson does. A
-- key that is not a read-write lock whose every owner is client-owned
-- ("<uuid>:...", lib/lock_shape.lua) is refused (WRONGTYPE), never deleted.
--! include lock_shape
--! include holder_identity
--! include wake_registry
--! include read_write_wake
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' or not is_read_write_hash(KEYS[1], true) then
  return not_a_lock(KEYS[1], kind)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] ~= 'any' and mode ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
forget_holder(KEYS[3])
wake_rw_free(KEYS[4], ARGV[2])
redis.call(ARGV[2], KEYS[2], '1')
return 1
