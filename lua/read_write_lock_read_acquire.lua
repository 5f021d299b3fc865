-- Read-write lock: take the read lock (Redisson RReadWriteLock layout).
-- KEYS[1] lock hash: 'mode' = 'read' | 'write', owner id = read holds,
--         '<owner id>:write' = write holds
-- KEYS[2] the caller's read-hold timeouts "<tag>:<owner id>:rwlock_timeout"
--         (one key ":<k>" per hold k, each with its own lease)
-- ARGV[1] lease in ms
-- ARGV[2] owner id
-- ARGV[3] the owner's write field "<owner id>:write"
-- ARGV[4] '1' if the owner believes it holds the write lock (it may read
--         through it: downgrade); otherwise a write hold of its own that
--         it does not know of (a reply lost in transit) keeps it out too,
--         until that hold lapses
-- ARGV[5] '0' once an earlier try of this acquisition found a read-write
--         lock: its whole shape is not read again (lib/lock_shape.lua,
--         looks_read_write)
-- Optional, turnstile's own (no identity: readers have none):
-- KEYS[3] the wake registry "turnstile_lock_wake:{<name>}"
--         (lib/read_write_wake.lua)
-- ARGV[6] with KEYS[3]: the caller's process wake channel
-- ARGV[7] with KEYS[3]: the caller's wall clock in ms
-- ARGV[8] with KEYS[3]: '1' if the caller waits after a failure (its
--         process is registered as a reader's)
-- ARGV[9] with KEYS[3]: '1' if other waiters of the caller's process
--         still wait after a success
-- ARGV[10] with KEYS[3]: publish command, PUBLISH or SPUBLISH: a reader
--         that gets in tells the registered readers' processes "s" (the
--         lock is in read mode: they may come in too)
-- KEYS[4] with KEYS[3]: the writer's identity (lib/holder_identity.lua):
--         a failed try reads whether the writer's release wakes the
--         registry (lib/read_write_wake.lua, rw_holders_recorded)
-- Optional, last (ARGV[11] with KEYS[3], else ARGV[6]): the reader's
--         identity (key_layout.h, "The holder's identity"), stored as the
--         value of each of its hold's timeout keys, where Redisson stores
--         1 and reads only the expiry: it lives and goes with the hold,
--         renewals included, for no command of its own.
-- Reply: nil when acquired; otherwise the lock's remaining ttl in ms (with
-- KEYS[3] {ttl, 1 if a hold is not a recorded turnstile hold, else 0}). Readers
-- share the lock; a writer excludes them, except its own reads (downgrade).
-- A held plain lock (RLock layout, no 'mode') is waited on as a writer;
-- any other key that is not a read-write lock is refused (WRONGTYPE).
--! include lock_shape
--! include holder_identity
--! include wake_registry
--! include read_write_wake
local registry = KEYS[3]
local hold_value = ARGV[registry and 11 or 6] or 1
-- The path when nobody waits (read_write_lock_write_acquire.lua).
if ARGV[9] ~= '1' and free_and_unwatched(KEYS[1], registry, nil) then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', hold_value, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
--! later
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', hold_value, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  if registry ~= nil then rw_read_acquired(registry, ARGV[2], ARGV[6], ARGV[7], ARGV[9], ARGV[1], ARGV[10]) end
  return nil
end
-- A plain lock (RLock layout, no 'mode') held under this name excludes
-- readers and writers alike: waited on, as a writer is (lib/lock_shape.lua).
local mode = false
if kind == 'hash' and looks_read_write(KEYS[1], ARGV[5]) then
  mode = redis.call('hget', KEYS[1], 'mode')
elseif held_hash_pttl(KEYS[1], kind, ARGV[5]) == false then
  return not_a_lock(KEYS[1], kind)
end
if mode == 'read' or (ARGV[4] == '1' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. holds, hold_value, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  if registry ~= nil then rw_read_acquired(registry, ARGV[2], ARGV[6], ARGV[7], ARGV[9], ARGV[1], ARGV[10]) end
  return nil
end
local pttl = redis.call('pttl', KEYS[1])
if registry == nil then
  return pttl
end
if ARGV[8] == '1' then register_rw_waiter(registry, ARGV[6], true, ARGV[7], pttl) end
return {pttl, rw_holders_recorded(registry, KEYS[1], KEYS[4]) and 0 or 1}
