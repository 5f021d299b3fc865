-- Fair lock: everything a status query needs, in one read (nothing is
-- evicted here: a waiter that died stays counted until a writing call drops
-- it, at most one waiter timeout after its last retry).
-- KEYS[1] lock hash
-- KEYS[2] wait queue (list of owner ids)
-- ARGV[1] owner id to report the hold count and queue position of
-- Reply: {held by anyone (0/1), the owner's hold count, pttl of the lock,
-- waiters in the queue, the owner's 0-based place in it or -1}.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local position = redis.call('lpos', KEYS[2], ARGV[1])
if position == false then
  position = -1
end
local held = 0
if kind == 'hash' then
  held = 1
end
return {held, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'), redis.call('pttl', KEYS[1]),
        redis.call('llen', KEYS[2]), position}
