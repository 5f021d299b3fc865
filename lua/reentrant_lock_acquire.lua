-- Reentrant lock: acquire (Redisson RLock layout).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms
-- ARGV[2] owner id "<client uuid>:<task id>" (the hash field)
-- Reply: nil when acquired (the owner's count is incremented and the lease
-- re-armed); otherwise the lock's remaining ttl in ms, which tells a waiter
-- how long it may sleep before it must try again.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
