-- Fair lock: a waiter that gives up (its wait ran out, an error) leaves the
-- queue, so nobody behind it waits for a waiter that is gone; if the lock is
-- free, the (new) head is woken.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- ARGV[1] owner id of the waiter leaving
-- ARGV[2] the caller's wall clock, epoch ms
-- ARGV[3] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[4] unlock message
-- ARGV[5] the most stale heads one call evicts
-- Reply: 1 if the waiter was queued (and is removed), 0 if it was not.
local removed = redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
local now = tonumber(ARGV[2])
for _ = 1, tonumber(ARGV[5]) do
  local stale = redis.call('lindex', KEYS[2], 0)
  if stale == false or tonumber(redis.call('zscore', KEYS[3], stale) or '0') > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], stale)
end
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false and redis.call('exists', KEYS[1]) == 0 then
  redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[4])
end
return removed
