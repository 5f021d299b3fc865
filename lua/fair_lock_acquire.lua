-- Fair lock: acquire, or join / keep one's place in the FIFO queue
-- (Redisson RFairLock keys; deadlines are refreshed, never chained).
-- KEYS[1] lock hash
-- KEYS[2] wait queue "redisson_lock_queue:{<name>}" (list of owner ids)
-- KEYS[3] waiter deadlines "redisson_lock_timeout:{<name>}" (zset, epoch ms)
-- KEYS[4] wake-up channel prefix "redisson_lock__channel:{<name>}"; a
--         waiter's own channel is "<prefix>:<owner id>"
-- KEYS[5] (fenced only) token counter "redisson_lock_token:{<name>}"
-- ARGV[1] lease in ms
-- ARGV[2] owner id
-- ARGV[3] waiter timeout in ms: a waiter that has not retried for this
--         long is taken for dead and evicted when it reaches the head
-- ARGV[4] the caller's wall clock, epoch ms
-- ARGV[5] '1' if the caller waits (joins the queue or refreshes its
--         deadline there), '0' for a single try that never queues
-- ARGV[6] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[7] unlock message
-- ARGV[8] the most stale heads one call evicts
-- Reply: {1, fencing token (0 if not fenced)} when acquired (reentrant
-- acquisitions included); {0, pttl of the lock (-2 when free)} when not.
-- A key that is not a lock hash (lib/lock_shape.lua) is refused (WRONGTYPE)
-- rather than waited on.
--! include lock_shape
local now = tonumber(ARGV[4])
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'hash' or
    (redis.call('hexists', KEYS[1], ARGV[2]) == 0 and not is_lock_hash(KEYS[1]))) then
  return not_a_lock(KEYS[1], kind)
end
-- Waiters that stopped retrying (crashed) are dropped as they reach the head.
local evicted = 0
while evicted < tonumber(ARGV[8]) do
  local stale = redis.call('lindex', KEYS[2], 0)
  if stale == false or tonumber(redis.call('zscore', KEYS[3], stale) or '0') > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], stale)
  evicted = evicted + 1
end
local head = redis.call('lindex', KEYS[2], 0)
local free = kind == 'none'
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 or (free and (head == false or head == ARGV[2])) then
  if head == ARGV[2] then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if #KEYS >= 5 then
    return {1, redis.call('incr', KEYS[5])}
  end
  return {1, 0}
end
if free and evicted > 0 then
  -- Whoever freed the lock woke a waiter that turned out dead: wake the
  -- first live one.
  redis.call(ARGV[6], KEYS[4] .. ':' .. head, ARGV[7])
end
if ARGV[5] == '1' then
  local deadline = now + tonumber(ARGV[3])
  if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  -- The queue outlives its latest deadline by nothing: if every waiter dies,
  -- both keys vanish on their own.
  local latest = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  local lifetime_ms = math.max(tonumber(latest[2]) - now, 1)
  redis.call('pexpire', KEYS[2], lifetime_ms)
  redis.call('pexpire', KEYS[3], lifetime_ms)
end
return {0, redis.call('pttl', KEYS[1])}
