-- Reentrant lock: acquire (Redisson RLock layout).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms
-- ARGV[2] owner id "<client uuid>:<task id>" (the hash field)
-- ARGV[3] '0' once an earlier try of this acquisition found a held lock
--         hash: the shape is not read again (lib/lock_shape.lua,
--         held_hash_pttl); anything else (or nothing) reads it
-- ARGV[4] (optional) the holder's identity, stored at KEYS[2]
--         (lib/holder_identity.lua)
-- Reply: nil when acquired (the owner's count is incremented and the lease
-- re-armed); otherwise the lock's remaining ttl in ms, which tells a waiter
-- how long it may sleep before it must try again. A key that is not a held
-- lock hash (lib/lock_shape.lua: any owner, every value a hold count) is
-- refused (WRONGTYPE) rather than waited on.
--! include lock_shape
--! include holder_identity
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' or (kind == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  note_holder(KEYS[2], ARGV[4], ARGV[1], count == 1)
  return nil
end
local pttl = held_hash_pttl(KEYS[1], kind, ARGV[3])
if pttl == false then
  return not_a_lock(KEYS[1], kind)
end
return pttl
