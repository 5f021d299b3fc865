-- Token lock: compare-and-delete, then wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] wake-up channel
-- KEYS[3] (optional) the holder's identity (lib/holder_identity.lua)
-- ARGV[1] token
-- ARGV[2] unlock message
-- ARGV[3] publish command: PUBLISH or SPUBLISH (Backend::publish_command())
-- Reply: 1 if the caller's token held the lock and it is released, 0 if
-- not (expired, or another holder's). Idempotent: a retry answers 0.
--! include holder_identity
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
forget_holder(KEYS[3])
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
