-- Shared: the unlock latch, "redisson_unlock_latch:<tag>:<request id>"
-- (Redisson's): an unlock remembers its first result there for a short
-- while, so that the same call sent again after a lost reply answers with
-- that result instead of releasing twice.
-- The latch-lifetime argument is negated on a call's first send: its
-- request id is new, so no latch can exist yet and none is read (one
-- command less on every release). A resend passes it as is.

-- The result `key` remembers (a number), or nil; and the latch's lifetime
-- in ms, from `lifetime_arg`.
local function read_unlock_latch(key, lifetime_arg)
  local lifetime_ms = tonumber(lifetime_arg)
  if lifetime_ms < 0 then
    return nil, -lifetime_ms
  end
  local remembered = redis.call('get', key)
  if remembered ~= false then
    return tonumber(remembered), lifetime_ms
  end
  return nil, lifetime_ms
end
