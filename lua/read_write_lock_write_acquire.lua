-- Read-write lock: take the write lock (Redisson RReadWriteLock layout).
-- KEYS[1] lock hash ('mode', owner ids, '<owner id>:write')
-- ARGV[1] lease in ms
-- ARGV[2] the owner's write field "<owner id>:write"
-- ARGV[3] owner id (its read field)
-- ARGV[4] '0' once an earlier try of this acquisition found a read-write
--         lock: its whole shape is not read again (lib/lock_shape.lua,
--         looks_read_write)
-- KEYS[2], ARGV[5] (optional) the writer's identity (lib/holder_identity.lua)
-- Optional, after KEYS[2] (the one order of lib/holder_identity.lua):
-- KEYS[3] the wake registry "turnstile_lock_wake:{<name>}"
--         (lib/read_write_wake.lua)
-- ARGV[6] with KEYS[3]: the caller's process wake channel
-- ARGV[7] with KEYS[3]: the caller's wall clock in ms
-- ARGV[8] with KEYS[3]: '1' if the caller waits after a failure (its
--         process is registered as a writer's)
-- ARGV[9] with KEYS[3]: '1' if other waiters of the caller's process
--         still wait after a success
-- Reply: nil when acquired; otherwise the lock's remaining ttl in ms (with
-- KEYS[3] {ttl, 1 if a hold is not a recorded turnstile hold, else 0}), or -3
-- when the owner holds the read lock: read -> write upgrade is refused at
-- once (Redisson's caller would wait for itself). A reentrant write adds
-- the lease to the lock's ttl, as Redisson does. A held plain lock (RLock
-- layout, no 'mode') is waited on as another writer; any other key that
-- is not a read-write lock is refused (WRONGTYPE).
--! include lock_shape
--! include holder_identity
--! include wake_registry
--! include read_write_wake
local registry = KEYS[3]
-- The path when nobody waits: free, no process registered, no other waiter
-- of the caller's to keep registered. Its hold is not recorded in the
-- registry (a waiter that comes finds it unrecorded and heeds the shared
-- channel until the next holder, recorded then).
if ARGV[9] ~= '1' and free_and_unwatched(KEYS[1], registry, nil) then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  note_holder(KEYS[2], ARGV[5], ARGV[1], true, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
--! later
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  note_holder(KEYS[2], ARGV[5], ARGV[1], true, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if registry ~= nil then rw_acquired(registry, ARGV[2], ARGV[6], false, ARGV[7], ARGV[9], ARGV[1]) end
  return nil
end
-- A plain lock (RLock layout, no 'mode') held under this name excludes
-- readers and writers alike: waited on, as a writer is (lib/lock_shape.lua).
local mode = false
if kind == 'hash' and looks_read_write(KEYS[1], ARGV[4]) then
  mode = redis.call('hget', KEYS[1], 'mode')
elseif held_hash_pttl(KEYS[1], kind, ARGV[4]) == false then
  return not_a_lock(KEYS[1], kind)
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  return -3
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local ttl = redis.call('pttl', KEYS[1]) + tonumber(ARGV[1])
  note_holder(KEYS[2], ARGV[5], ttl, false)
  redis.call('pexpire', KEYS[1], ttl)
  if registry ~= nil then rw_acquired(registry, ARGV[2], ARGV[6], false, ARGV[7], ARGV[9], ttl) end
  return nil
end
local pttl = redis.call('pttl', KEYS[1])
if registry == nil then
  return pttl
end
if ARGV[8] == '1' then register_rw_waiter(registry, ARGV[6], false, ARGV[7], pttl) end
return {pttl, rw_holders_recorded(registry, KEYS[1], KEYS[2]) and 0 or 1}
