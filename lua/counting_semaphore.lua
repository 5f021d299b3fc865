-- Semaphore (Redisson RSemaphore layout): every operation, one script, so
-- the check of the key is written once.
-- KEYS[1] semaphore: a string holding the available permits as an integer
--         (absent: 0 available; no expiry)
-- KEYS[2] wake-up channel "redisson_sc:{<name>}"
-- ARGV[1] operation, one of:
--   try_acquire      ARGV[2] = permits n >= 1. Takes all n if available.
--                    Reply 1 if taken, 0 if fewer are available (nothing
--                    taken).
--   add              ARGV[2] = permits to add (negative: remove; the count
--                    may go below 0). Release and addPermits. Creates the
--                    key; publishes the new count. Reply: the new count;
--                    an error if it would pass +-2^53, nothing changed.
--   try_set_permits  ARGV[2] = permits >= 0. Sets them only if the key is
--                    absent, publishing the count. Reply 1 if set, else 0.
--   drain            Takes every available permit. Reply: how many (>= 0).
--                    A negative count is left as it is (Redisson would set 0,
--                    creating permits).
--   available        Reply: the count (0 if absent).
--   set_permits      ARGV[2] = permits >= 0: the count becomes that,
--                    whatever it was, published. Reply: the count before
--                    (0 if absent).
--   reset            Deletes the count (an operator's reset). Reply 1 if
--                    it existed, else 0.
-- ARGV[3] publish command ("PUBLISH" or "SPUBLISH")
-- Optional, turnstile's own (fleet-wide wake-ups, lib/wake_registry.lua):
-- KEYS[3] the wake registry "turnstile_lock_wake:{<name>}", and
-- ARGV[4] the caller's wake channel, ARGV[5] its wall clock in ms,
-- ARGV[6] '1' if a failed try_acquire will wait, ARGV[7] '1' if other
-- waiters of its process still wait, ARGV[8] the longest a registered
-- waiter sleeps before it tries again (ms). With it a release (add,
-- try_set_permits, set_permits) wakes as many registered processes as it
-- makes permits available, on their own channels, before the shared
-- channel is told as always, signed ("+<count>": lib/wake_registry.lua,
-- tell_count: the registry was woken); a try_acquire registers the
-- caller's process when it fails (and will wait), forgets it when it
-- succeeds (unless others of it wait), and fails with 2 instead of 0 (a
-- fleet waiter may ignore signed counts: an unsigned one comes from a
-- client that woke no registry, Redisson or turnstile without it), and
-- succeeds with 3 instead of 1 when permits are left and others of its
-- process wait (one of them tries: a release between the one that woke
-- this process, forgetting it, and this try told only the shared
-- channel).
-- A key of another type, or a string that is not an integer: WRONGTYPE,
-- nothing changed.
--! include wake_registry
local registry = KEYS[3]
-- GET refuses a key of another type itself.
local value = redis.pcall('get', KEYS[1])
if type(value) == 'table' or (value and not string.match(value, '^%-?%d+$')) then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local exists = value ~= false
local available = tonumber(value or '0')

-- Permits were made available: `count` now, `before` before. The
-- registered processes are woken first, one per permit (only if any is
-- registered: one existence check when nobody waits), then the shared
-- channel is told, signed when the registry was woken.
local function released(before, count)
  if registry ~= nil and count > 0 and count > before and redis.call('exists', registry) == 1 then
    wake_for_permits(registry, ARGV[3], count - math.max(before, 0), count)
  end
  tell_count(ARGV[3], KEYS[2], count, registry ~= nil)
end

local operation = ARGV[1]
if operation == 'try_acquire' then
  if available < tonumber(ARGV[2]) then
    if registry == nil then return 0 end
    if ARGV[6] == '1' then
      register_waiter(registry, ARGV[4], ARGV[5], ARGV[8])
      if tonumber(ARGV[2]) > 1 then wants_several(registry, ARGV[8]) end
    end
    return 2
  end
  redis.call('decrby', KEYS[1], ARGV[2])
  if registry ~= nil then
    after_success(registry, ARGV[4], ARGV[5], ARGV[7], ARGV[8])
    if available - tonumber(ARGV[2]) > 0 and ARGV[7] == '1' then return 3 end
  end
  return 1
elseif operation == 'add' then
  -- Lua numbers are doubles: a count past 2^53 (kMaxPermits) would be
  -- read back inexactly, so it is never stored.
  if math.abs(available + tonumber(ARGV[2])) > 9007199254740992 then
    return redis.error_reply('ERR semaphore count would pass 2^53 permits')
  end
  local count = redis.call('incrby', KEYS[1], ARGV[2])
  released(available, count)
  return count
elseif operation == 'try_set_permits' then
  if exists then
    return 0
  end
  redis.call('set', KEYS[1], ARGV[2])
  released(0, tonumber(ARGV[2]))
  return 1
elseif operation == 'drain' then
  if available <= 0 then
    return 0
  end
  redis.call('decrby', KEYS[1], available)
  return available
elseif operation == 'available' then
  return available
elseif operation == 'set_permits' then
  redis.call('set', KEYS[1], ARGV[2])
  released(available, tonumber(ARGV[2]))
  return available
elseif operation == 'reset' then
  return redis.call('del', KEYS[1])
end
return redis.error_reply('ERR unknown semaphore operation ' .. tostring(operation))
