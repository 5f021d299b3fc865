-- Fair lock: delete it whoever holds it, and wake the first live waiter.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- KEYS[5] turnstile waiters' liveness (zset, epoch ms; lib/fair_queue.lua)
-- KEYS[6] (optional) the holder's identity, deleted too (lib/holder_identity.lua)
-- ARGV[1] unlock message
-- ARGV[2] the caller's wall clock, epoch ms
-- ARGV[3] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[4] the most stale heads one call evicts
-- Reply: 1 if a lock was deleted, 0 if there was none. A key that is not a
-- lock hash, by type or by shape (lib/lock_shape.lua: every value a hold
-- count, every owner "<uuid>:..."), is refused (WRONGTYPE) and left alone:
-- force-unlocking must never delete unrelated data.
--! include lock_shape
--! include fair_queue
--! include holder_identity
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'hash' or not is_lock_hash(KEYS[1])) then
  return not_a_lock(KEYS[1], kind)
end
local now = tonumber(ARGV[2])
local _, head = evict_dead_heads(KEYS[2], KEYS[3], KEYS[5], now, tonumber(ARGV[4]))
local deleted = redis.call('del', KEYS[1])
forget_holder(KEYS[6])
if head ~= false then
  redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return deleted
