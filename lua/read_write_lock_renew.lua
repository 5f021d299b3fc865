-- Read-write lock watchdog: re-arm many holds in one call.
-- KEYS[i] lock hash i
-- ARGV[1] lease in ms
-- ARGV[i + 1] the field of hold i: an owner id (a read hold) or
--             '<owner id>:write' (a write hold)
-- KEYS[n + i] (optional, all or none; n holds) the lock's writer identity,
--         re-armed with a write hold (lib/holder_identity.lua)
-- Reply: array, element i is 1 if hold i is still there (its lease and the
-- lock's re-armed, the lock's never shortened) or 0 if it is gone (stop
-- renewing, tell the holder). A read hold's timeout keys are "<tag>:<owner
-- id>:rwlock_timeout:<k>", <tag> by Redisson's rule (key_layout.h): "{N}",
-- or N itself when it has a '{'.
local function tag(name)
  if string.find(name, '{', 1, true) then return name end
  return '{' .. name .. '}'
end
--! include holder_identity
-- n: the holds given (one argument each); keys beyond n are identities.
local count = math.min(#KEYS, #ARGV - 1)
local renewed = {}
for i = 1, count do
  local field = ARGV[i + 1]
  -- The hold's count, not `count` (the holds given: renewed_holder's).
  local holds = tonumber(redis.call('hget', KEYS[i], field))
  if holds == nil then
    renewed[i] = 0
  else
    if not string.find(field, ':write$') then
      local prefix = tag(KEYS[i]) .. ':' .. field .. ':rwlock_timeout:'
      for k = 1, holds do
        redis.call('pexpire', prefix .. k, ARGV[1])
      end
    end
    local ttl = math.max(redis.call('pttl', KEYS[i]), tonumber(ARGV[1]))
    if string.find(field, ':write$') then rearm_holder(renewed_holder(count, i), ttl) end
    redis.call('pexpire', KEYS[i], ttl)
    renewed[i] = 1
  end
end
return renewed
