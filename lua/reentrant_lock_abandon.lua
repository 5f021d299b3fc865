-- Reentrant lock, direct handoff (lib/wake_registry.lua): a waiting
-- acquisition ended without the lock (its wait ran out, it was stopped, a
-- try failed). Its process's offer is withdrawn if it is its own, the
-- process is forgotten when this was its last waiter, and a grant made to
-- this acquisition that it never took is given back at once: the hold is
-- released as an unlock would (the next registered process granted or
-- woken, "0" on the shared channel).
-- KEYS[1] lock hash
-- KEYS[2] wake-up channel "redisson_lock__channel:{<name>}"
-- KEYS[3] the holder's identity (lib/holder_identity.lua)
-- KEYS[4] the wake registry "turnstile_lock_wake:{<name>}"
-- KEYS[5] the grants "turnstile_lock_grants:{<name>}"
-- ARGV[1] owner id
-- ARGV[2] the acquisition id (hex)
-- ARGV[3] the process's wake channel
-- ARGV[4] '1' if no other waiter of the process waits (it is forgotten)
-- ARGV[5] unlock message ("0")
-- ARGV[6] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[7] the caller's wall clock in ms
-- Reply: 1 if a grant was given back, else 0.
--! include holder_identity
--! include wake_registry
local lock, identity, registry, grants = KEYS[1], KEYS[3], KEYS[4], KEYS[5]
withdraw_offer(grants, ARGV[3], ARGV[1])
if ARGV[4] == '1' then redis.call('zrem', registry, ARGV[3]) end
if redis.call('hget', grants, ARGV[1]) ~= 'g:' .. ARGV[2] then return 0 end
redis.call('hdel', grants, ARGV[1])
if redis.call('hexists', lock, ARGV[1]) == 0 then return 0 end
if redis.call('hincrby', lock, ARGV[1], -1) > 0 then return 1 end
redis.call('del', lock)
forget_holder(identity)
grant_or_wake(registry, grants, lock, identity, ARGV[6], ARGV[7])
redis.call(ARGV[6], KEYS[2], ARGV[5])
return 1
