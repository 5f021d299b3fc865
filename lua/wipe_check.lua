-- Wipe check: has the server kept this Client's presence key since the
-- last check? (locks/engine/wipe_check.h)
-- KEYS[1] the presence key "turnstile_presence:{<name>}:<client uuid>"
-- ARGV[1] its expiry in ms
-- ARGV[2] re-armed once fewer ms than this are left
-- Reply: 1 if it was there, 0 if it was missing (it is written now).
local left = redis.call('pttl', KEYS[1])
if left >= tonumber(ARGV[2]) then
  return 1
end
redis.call('set', KEYS[1], '1', 'px', ARGV[1])
if left == -2 then
  return 0
end
return 1
