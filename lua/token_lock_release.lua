-- Token lock: compare-and-delete, then wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] wake-up channel
-- ARGV[1] token
-- ARGV[2] unlock message
-- ARGV[3] publish command: PUBLISH or SPUBLISH (Backend::publish_command())
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[3] the holder's identity (lib/holder_identity.lua)
-- KEYS[4] (only after KEYS[3]) the wake registry (lib/wake_registry.lua):
--         one registered process is woken on its own channel, then the
--         shared channel told as before
-- Reply: 1 if the caller's token held the lock and it is released, 0 if
-- not (expired, or another holder's). Idempotent: a retry answers 0.
--! include holder_identity
--! include wake_registry
local identity, registry = KEYS[3], KEYS[4]
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
forget_holder(identity)
if registry ~= nil then
  wake_registered(registry, ARGV[3])
end
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
