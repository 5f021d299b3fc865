-- Fleet-wide wake-ups: the last waiter of a process left without the lock
-- (its wait ran out, it was stopped, a try failed): the process is
-- forgotten, so no release picks it (lib/wake_registry.lua).
-- KEYS[1] the wake registry "turnstile_lock_wake:{<name>}"
-- KEYS[2] (with ARGV[1] 'lock') the lock's key
-- ARGV[1] '' | 'lock': whether a wake-up left unused is passed on (a
--         lock's; a semaphore's count says how many to wake, and its own
--         releases keep that account). A process whose registration is gone already was woken by a
--         release (which takes the registration it wakes) and leaves that
--         wake-up unused: its message came as the last waiter left, or was
--         swallowed by the subscription it was dropping. Then the next
--         registered process is woken instead, so nobody waits out a lease
--         for a wake-up that went to a process leaving, if the lock is free
--         and no turnstile holder is recorded (whose release will wake one).
-- ARGV[2] the publish command (PUBLISH or SPUBLISH) for that wake-up
-- ARGV[3] the process's wake channel
-- ARGV[4] (optional) its other registration: a read-write lock's reader's
--         (lib/read_write_wake.lua)
-- Reply: how many of them were registered (0, 1 or 2).
--! include holder_identity
--! include wake_registry
local pass_on, publish = ARGV[1], ARGV[2]
local left = redis.call('zrem', KEYS[1], unpack(ARGV, 3))
if left == 0 and pass_on == 'lock' then
  if redis.call('exists', KEYS[2]) == 0 and redis.call('zcount', KEYS[1], 0, 0) == 0 then
    wake_registered(KEYS[1], publish)
  end
end
return left
