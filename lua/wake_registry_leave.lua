-- Fleet-wide wake-ups: the last waiter of a process left without the lock
-- (its wait ran out, it was stopped, a try failed): the process is
-- forgotten, so no release picks it (lib/wake_registry.lua).
-- KEYS[1] the wake registry "turnstile_lock_wake:{<name>}"
-- ARGV[1] the process's wake channel
-- ARGV[2] (optional) its other registration: a read-write lock's reader's
--         (lib/read_write_wake.lua)
-- Reply: how many of them were registered (0, 1 or 2).
return redis.call('zrem', KEYS[1], unpack(ARGV))
