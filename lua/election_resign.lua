-- Clears a leader's record once it resigned (include/turnstile/election.h),
-- and tells the observers. Run after the release of the election's lock:
-- a record that names another owner (a successor proclaimed meanwhile) is
-- left alone.
-- KEYS[1] the leader record "turnstile_leader:{<name>}"
-- ARGV[1] the resigning leader's owner id
-- ARGV[2] the channel observers listen on
-- ARGV[3] the publish command (PUBLISH, or SPUBLISH on a sharded Cluster)
-- Reply: 1 cleared (and "0" published); 0 the record was not this leader's.
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hget', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], '0')
return 1
