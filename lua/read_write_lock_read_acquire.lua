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
-- Reply: nil when acquired; otherwise the lock's remaining ttl in ms. Readers
-- share the lock; a writer excludes them, except its own reads (downgrade).
-- A key that is not a read-write lock is refused (WRONGTYPE).
--! include lock_shape
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if kind ~= 'hash' or not looks_read_write(KEYS[1], ARGV[5]) then
  return not_a_lock(KEYS[1], kind)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (ARGV[4] == '1' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. holds, 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
