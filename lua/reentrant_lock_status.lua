-- Reentrant lock: everything a status query needs, in one read.
-- KEYS[1] lock hash
-- ARGV[1] owner id to report the hold count of
-- Reply: {held by anyone (0/1), the owner's hold count, pttl of the lock}.
-- A key of another type is an error: a lock name must not hold other data.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0, 0, -2}
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return {1, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'), redis.call('pttl', KEYS[1])}
