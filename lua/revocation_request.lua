-- Asks the holders of a lock to release it (include/turnstile/revocation.h):
-- a message to the watches open on its revocation channel. Nothing is
-- stored and the lock is untouched.
-- KEYS[1] the lock's key: only where the call runs (a Cluster's node)
-- ARGV[1] the channel, "turnstile_revoke__channel:{<name>}"
-- ARGV[2] the reason (may be empty)
-- ARGV[3] the publish command (PUBLISH, or SPUBLISH on a sharded Cluster)
-- Reply: how many subscribers received it.
if ARGV[3] ~= 'PUBLISH' and ARGV[3] ~= 'SPUBLISH' then
  return redis.error_reply('ERR the publish command must be PUBLISH or SPUBLISH')
end
return redis.call(ARGV[3], ARGV[1], ARGV[2])
