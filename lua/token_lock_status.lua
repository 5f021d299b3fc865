-- Token lock: status in one read.
-- KEYS[1] lock key
-- ARGV[1] token to compare with (may be empty)
-- Reply: {held by anyone (0/1), held with this token (0/1), pttl}.
--! include lock_shape
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0, 0, -2}
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local mine = 0
if ARGV[1] ~= '' and token_of(redis.call('get', KEYS[1])) == ARGV[1] then
  mine = 1
end
return {1, mine, redis.call('pttl', KEYS[1])}
