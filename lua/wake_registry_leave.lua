-- Fleet-wide wake-ups: the last waiter of a process left without the lock
-- (its wait ran out, it was stopped, a try failed): the process is
-- forgotten, so no release picks it (lib/wake_registry.lua).
-- KEYS[1] the wake registry "turnstile_lock_wake:{<name>}"
-- ARGV[1] the process's wake channel
-- Reply: 1 if it was registered, else 0.
return redis.call('zrem', KEYS[1], ARGV[1])
