-- Fair lock: a waiter that gives up (its wait ran out, an error) leaves the
-- queue, so nobody behind it waits for a waiter that is gone; as Redisson's
-- give-up, the deadlines behind it come down by its wait
-- (lib/fair_queue.lua). If the lock is free, the (new) head is woken.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- KEYS[5] turnstile waiters' liveness (zset, epoch ms)
-- ARGV[1] owner id of the waiter leaving
-- ARGV[2] the caller's wall clock, epoch ms
-- ARGV[3] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[4] unlock message
-- ARGV[5] the most stale heads one call evicts
-- ARGV[6] the chain wait in ms (unused: the waiter's own distance to its
--         predecessor is what it added to the chain)
-- ARGV[7] waiter timeout in ms (with it, a far waiter that becomes the
--         head is promoted: lib/fair_queue.lua, "Near and far waiters")
-- KEYS[6], KEYS[7], ARGV[8] (optional) direct handoff: the holder's
--         identity, the grants (lib/fair_handoff.lua) and the leaving
--         acquisition's id. A grant to it that it never took is given
--         back: the lock is released and passed on.
-- Reply: 1 if the waiter was queued (and is removed) or its grant given
-- back, 0 if neither.
--! include fair_queue
--! include holder_identity
--! include fair_handoff
local now = tonumber(ARGV[2])
local grants = KEYS[7]
local wake = {prefix = KEYS[4], publish = ARGV[3], timeout = tonumber(ARGV[7]), grants = grants}
local queue = {lock = KEYS[1], queue = KEYS[2], deadlines = KEYS[3], prefix = KEYS[4], alive = KEYS[5],
               grants = grants, identity = KEYS[6], wake = wake, limit = tonumber(ARGV[5])}
if grants ~= nil then
  local marker = redis.call('hget', grants, ARGV[1])
  redis.call('hdel', grants, ARGV[1])
  if marker == 'g:' .. ARGV[8] and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
    -- Granted (it left the queue then) and never taken: its one hold goes.
    if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then
      redis.call('del', KEYS[1])
      forget_holder(KEYS[6])
      local _, head = evict_dead_heads(KEYS[2], KEYS[3], KEYS[5], now, tonumber(ARGV[5]), grants, wake)
      pass_on(queue, head, now, ARGV[3], ARGV[4])
    end
    return 1
  end
end
-- Turnstile waiters alone keep their own deadlines: nobody is moved, and
-- the place is not looked up (LREM finds it).
local chained = not turnstile_only(KEYS[2], KEYS[5], now)
local position = false
if chained then position = redis.call('lpos', KEYS[2], ARGV[1]) end
local gap = 0
if position ~= false then
  local mine = tonumber(redis.call('zscore', KEYS[3], ARGV[1]) or '')
  local before = now
  if position > 0 then
    before = tonumber(redis.call('zscore', KEYS[3], redis.call('lindex', KEYS[2], position - 1)) or '') or now
  end
  if mine ~= nil then gap = mine - before end
end
local removed = redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[5], ARGV[1])
if position ~= false then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
  local margin = tonumber(ARGV[7])
  shift_from(KEYS[2], KEYS[3], position, leave_shift(KEYS[2], KEYS[3], position, gap, now, margin), KEYS[5], now,
             margin)
elseif removed == 1 then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
end
local _, head = evict_dead_heads(KEYS[2], KEYS[3], KEYS[5], now, tonumber(ARGV[5]), grants, wake)
if removed == 1 then promote_near(KEYS[2], KEYS[5], now, wake) end
if redis.call('exists', KEYS[1]) == 0 then pass_on(queue, head, now, ARGV[3], ARGV[4]) end
return removed
