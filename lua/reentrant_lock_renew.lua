-- Reentrant lock watchdog: re-arm the lease of many held locks in one call.
-- KEYS[i] lock hash i (all in one cluster slot when batching on a cluster)
-- ARGV[1] lease in ms
-- ARGV[i + 1] owner id of lock i
-- KEYS[n + i] (optional, all or none; n locks) lock i's holder identity,
--         re-armed with it (lib/holder_identity.lua)
-- Reply: array, element i is 1 if lock i is still held by its owner (lease
-- re-armed) or 0 if it is gone (stop renewing, tell the holder).
--! include holder_identity
-- n: the holds given (one argument each); keys beyond n are identities.
local count = math.min(#KEYS, #ARGV - 1)
local renewed = {}
for i = 1, count do
  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    rearm_holder(renewed_holder(count, i), ARGV[1])
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
