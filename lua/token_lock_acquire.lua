-- Token lock: SET NX PX, the plain lock.
-- KEYS[1] lock key (a string holding the holder's random token)
-- ARGV[1] token
-- ARGV[2] lease in ms
-- Reply: nil when acquired; otherwise the lock's pttl. A key of another type
-- is refused (WRONGTYPE) rather than waited on forever.
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then
  return nil
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('pttl', KEYS[1])
