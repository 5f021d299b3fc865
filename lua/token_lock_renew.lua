-- Token lock watchdog: compare-and-extend many locks in one call.
-- KEYS[i] lock key i
-- ARGV[1] lease in ms
-- ARGV[i + 1] token of lock i
-- KEYS[n + i] (optional, all or none; n locks) lock i's holder identity,
--         re-armed with it (lib/holder_identity.lua)
-- Reply: array, element i is 1 if lock i still holds its token (lease
-- re-armed), else 0.
--! include lock_shape
--! include holder_identity
-- n: the holds given (one argument each); keys beyond n are identities.
local count = math.min(#KEYS, #ARGV - 1)
local renewed = {}
for i = 1, count do
  local value = redis.call('get', KEYS[i])
  if value and token_of(value) == ARGV[i + 1] then
    rearm_holder(renewed_holder(count, i), ARGV[1])
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
