-- Fair lock: delete it whoever holds it, and wake the first live waiter.
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- KEYS[3] waiter deadlines (zset, epoch ms)
-- KEYS[4] wake-up channel prefix; the head's channel is "<prefix>:<owner id>"
-- ARGV[1] unlock message
-- ARGV[2] the caller's wall clock, epoch ms
-- ARGV[3] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[4] the most stale heads one call evicts
-- Reply: 1 if a lock was deleted, 0 if there was none. A key of another type
-- is refused (WRONGTYPE): force-unlocking must never delete unrelated data.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local now = tonumber(ARGV[2])
for _ = 1, tonumber(ARGV[4]) do
  local stale = redis.call('lindex', KEYS[2], 0)
  if stale == false or tonumber(redis.call('zscore', KEYS[3], stale) or '0') > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], stale)
end
local deleted = redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return deleted
