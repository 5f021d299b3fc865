-- Token lock: compare-and-delete, then, if its value is marked
-- (lib/lock_shape.lua, WAITERS_MARK: somebody may wait), wake one waiter.
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
--! include lock_shape
--! include holder_identity
--! include wake_registry
local identity, registry = KEYS[3], KEYS[4]
local value = redis.call('get', KEYS[1])
if not value or token_of(value) ~= ARGV[1] then
  return 0
end
delete_with_holder(KEYS[1], identity)
-- Unmarked: nobody has waited for it (with the registry: a holder that
-- came while processes were registered marked it itself). Without the
-- registry (wake scope process), waiters are told always, as before.
if registry ~= nil and value == ARGV[1] then
  return 1
end
if registry ~= nil then
  wake_registered(registry, ARGV[3])
end
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
