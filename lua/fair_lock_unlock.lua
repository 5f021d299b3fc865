-- Fair lock: release one hold, idempotent per request (as the reentrant
-- lock's unlock), and wake only the head of the queue.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- KEYS[5] latch "redisson_unlock_latch:{<name>}:<request id>"
-- ARGV[1] unlock message
-- ARGV[2] lease in ms, re-armed after a partial unlock
-- ARGV[3] owner id
-- ARGV[4] latch lifetime in ms
-- ARGV[5] the caller's wall clock, epoch ms
-- ARGV[6] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[7] the most stale heads one call evicts
-- Reply: nil if the owner does not hold the lock; 0 if holds remain; 1 if
-- the lock was released (and the first live waiter told).
local remembered = redis.call('get', KEYS[5])
if remembered ~= false then
  return tonumber(remembered)
end
local now = tonumber(ARGV[5])
for _ = 1, tonumber(ARGV[7]) do
  local stale = redis.call('lindex', KEYS[2], 0)
  if stale == false or tonumber(redis.call('zscore', KEYS[3], stale) or '0') > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], stale)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[4])
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  redis.call(ARGV[6], KEYS[4] .. ':' .. head, ARGV[1])
end
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
