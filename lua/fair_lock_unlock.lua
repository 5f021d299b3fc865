-- Fair lock: release one hold, idempotent per request (as the reentrant
-- lock's unlock), and wake only the head of the queue.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- KEYS[5] latch "redisson_unlock_latch:{<name>}:<request id>"
-- KEYS[6] turnstile waiters' liveness (zset, epoch ms; lib/fair_queue.lua)
-- KEYS[7] (optional) the holder's identity (lib/holder_identity.lua)
-- KEYS[8] (optional, after KEYS[7]) the grants "turnstile_lock_grants:
--         {<name>}": a freed lock is granted to a turnstile head that
--         offered to take grants (lib/fair_handoff.lua)
-- ARGV[1] unlock message
-- ARGV[2] lease in ms, re-armed after a partial unlock
-- ARGV[3] owner id
-- ARGV[4] latch lifetime in ms, negated on the call's first send
--         (lib/unlock_latch.lua)
-- ARGV[5] the caller's wall clock, epoch ms
-- ARGV[6] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[7] the most stale heads one call evicts
-- ARGV[8] (optional) the caller's waiter timeout in ms: with it, a far
--         waiter that becomes the head is promoted (lib/fair_queue.lua,
--         "Near and far waiters")
-- Reply: nil if the owner does not hold the lock; 0 if holds remain; 1 if
-- the lock was released (and the first live waiter granted it or told). When nobody
-- holds it (a lease that ran out publishes nothing), the head is told all
-- the same, as Redisson's unlock does, so a waiter asleep until the old
-- lease's end takes it now; the reply stays nil (the caller held nothing).
--! include unlock_latch
--! include fair_queue
--! include holder_identity
--! include fair_handoff
local remembered, latch_ms = read_unlock_latch(KEYS[5], ARGV[4])
if remembered ~= nil then
  return remembered
end
local grants = KEYS[8]
-- The path when nobody waits: the owner's last hold let go with nobody
-- queued and no grant left (one command for the three keys): deleted with
-- its identity, nobody to tell.
if tonumber(redis.call('hget', KEYS[1], ARGV[3])) == 1 and
    redis.call('exists', KEYS[2], KEYS[3], grants or KEYS[2]) == 0 then
  delete_with_holder(KEYS[1], KEYS[7])
  redis.call('set', KEYS[5], 1, 'px', latch_ms)
  return 1
end
--! later
local now = tonumber(ARGV[5])
local wake = nil
if ARGV[8] ~= nil then
  wake = {prefix = KEYS[4], publish = ARGV[6], timeout = tonumber(ARGV[8]), grants = grants}
end
local queue = {lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], prefix = KEYS[4], alive = KEYS[6],
               grants = grants, identity = KEYS[7], wake = wake, limit = tonumber(ARGV[7])}
-- Nothing below changes the queue but pass_on: its head is the one left here.
local _, head = evict_dead_heads(KEYS[2], KEYS[3], KEYS[6], now, tonumber(ARGV[7]), grants, wake)
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  if redis.call('exists', KEYS[1]) == 0 then pass_on(queue, head, now, ARGV[6], ARGV[1]) end
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  rearm_holder(KEYS[7], ARGV[2])
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', latch_ms)
  return 0
end
redis.call('del', KEYS[1])
forget_holder(KEYS[7])
if grants ~= nil then redis.call('hdel', grants, ARGV[3]) end
pass_on(queue, head, now, ARGV[6], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', latch_ms)
return 1
