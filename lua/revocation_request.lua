-- Asks the holders of a lock to release it (include/turnstile/revocation.h):
-- a message to the watches open on its revocation channel. Nothing is
-- stored and the lock is untouched.
-- KEYS[1] the lock's key: only where the call runs (a Cluster's node)
-- ARGV[1] the channel, "turnstile_revoke__channel:{<name>}"
-- ARGV[2] the reason (may be empty)
-- ARGV[3] the publish command (PUBLISH, or SPUBLISH on a sharded Cluster)
-- Reply: how many subscribers received it.
return redis.call(ARGV[3], ARGV[1], ARGV[2])
