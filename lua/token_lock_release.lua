-- Token lock: compare-and-delete, then wake one waiter.
-- KEYS[1] lock key
-- KEYS[2] wake-up channel
-- ARGV[1] token
-- ARGV[2] unlock message
-- ARGV[3] publish command: PUBLISH or SPUBLISH (Backend::publish_command())
-- KEYS[3] (optional) turnstile's wake registry (lib/wake_registry.lua): one
--         registered process is woken on its own channel, then the
--         shared channel told as before
--! include wake_registry
-- Reply: 1 if the caller's token held the lock and it is released, 0 if
-- not (expired, or another holder's). Idempotent: a retry answers 0.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
if KEYS[3] ~= nil then
  wake_registered(KEYS[3], ARGV[3])
end
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
