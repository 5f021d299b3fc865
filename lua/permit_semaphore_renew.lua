-- Crash-safe semaphore watchdog: push back the expiry of many held permits
-- in one call.
-- KEYS[i] held permits "{<name>}:timeout" of permit i
-- ARGV[1] lease in ms
-- ARGV[2] now, Unix ms by the caller's clock
-- ARGV[i + 2] permit id i
-- Each renewed permit's identity (lib/holder_identity.lua) is re-armed
-- with it.
-- Reply: array, element i is 1 if permit i was held and unexpired (its
-- expiry is now + lease), 0 if it is gone (expired, released, or the key
-- holds something else): stop renewing, tell the holder.
--! include holder_identity
local now = tonumber(ARGV[2])
local expiry = now + tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  renewed[i] = 0
  if redis.call('type', KEYS[i]).ok == 'zset' then
    local current = redis.call('zscore', KEYS[i], ARGV[i + 2])
    if current and tonumber(current) > now then
      redis.call('zadd', KEYS[i], 'xx', expiry, ARGV[i + 2])
      redis.call('pexpire', permit_identity_key(KEYS[i], ARGV[i + 2]), ARGV[1])
      renewed[i] = 1
    end
  end
end
return renewed
