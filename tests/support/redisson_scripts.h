// support/redisson_scripts.h
//
// A Redisson client's behaviour at the Redis level, as Lua written by us
// from /work/shared/reference/redisson-reference.md (no Redisson code): the
// interop suite (tests/interop) plays Redisson with these against
// turnstile's locks, and the differential suite runs them beside
// turnstile's fair-lock and read-write lock scripts on the fake and on a
// real redis-server.
//
// Conventions: durations and "now" (the client's wall clock, epoch ms) are
// ARGV; owner ids are "<uuid>:<thread id>"; replies are plain (nil = took
// the lock, an integer = the ttl to wait), as Redisson's scripts.

#ifndef TURNSTILE_TESTS_SUPPORT_REDISSON_SCRIPTS_H_
#define TURNSTILE_TESTS_SUPPORT_REDISSON_SCRIPTS_H_

namespace turnstile::testing::redisson {

// RLock acquire. KEYS[1] hash. ARGV: lease ms, owner id.
// nil when held (taken or re-entered), else the hash's PTTL.
inline constexpr const char* kLockAcquire = R"lua(
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

// RFencedLock acquire. KEYS[1] hash, KEYS[2] token counter. ARGV: lease
// ms, owner id. {1, token} when held, {0, pttl} when not.
inline constexpr const char* kFencedAcquire = R"lua(
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
)lua";

// RLock unlock with the latch. KEYS[1] hash, KEYS[2] channel, KEYS[3]
// latch. ARGV: message, lease ms, owner id, latch ms. nil: not the owner;
// 0: still held; 1: released (and published). The client then DELs the
// latch.
inline constexpr const char* kLockUnlock = R"lua(
local remembered = redis.call('get', KEYS[3])
if remembered ~= false then return tonumber(remembered) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[4])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
)lua";

// RFairLock acquire. KEYS[1] hash, KEYS[2] queue, KEYS[3] deadlines.
// ARGV: lease ms, owner id, w (the wait) ms, now, 'wait' or 'try'.
// nil when held; else the ttl (a try that may not queue: 1, "false").
inline constexpr const char* kFairAcquire = R"lua(
local now = tonumber(ARGV[4])
local w = tonumber(ARGV[3])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline == nil or deadline > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (head == false or head == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, member in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -w, member)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if ARGV[5] ~= 'wait' then return 1 end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local tail = redis.call('lindex', KEYS[2], -1)
local ttl
local tail_deadline = tail ~= false and tail ~= ARGV[2] and redis.call('zscore', KEYS[3], tail)
if tail_deadline then
  ttl = tonumber(tail_deadline) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + w + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
)lua";

// RFairLock give-up. KEYS[1] queue, KEYS[2] deadlines. ARGV: owner id,
// w ms. Entries behind the owner come down by w; the owner leaves.
inline constexpr const char* kFairGiveUp = R"lua(
local position = redis.call('lpos', KEYS[1], ARGV[1])
if position ~= false then
  for _, member in ipairs(redis.call('lrange', KEYS[1], position + 1, -1)) do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), member)
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return 1
)lua";

// RFairLock unlock. KEYS[1] hash, KEYS[2] queue, KEYS[3] deadlines,
// KEYS[4] channel prefix (the head's channel: "<prefix>:<owner id>"),
// KEYS[5] latch. ARGV: message, lease ms, owner id, latch ms, now.
inline constexpr const char* kFairUnlock = R"lua(
local remembered = redis.call('get', KEYS[5])
if remembered ~= false then return tonumber(remembered) end
local now = tonumber(ARGV[5])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline == nil or deadline > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
local function wake_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_head()
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[4])
  return 0
end
redis.call('del', KEYS[1])
wake_head()
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
)lua";

// RSemaphore. KEYS[1] count, KEYS[2] channel. ARGV: 'acquire' | 'release',
// n. acquire: 1 if taken, else 0; release: the new count (published).
inline constexpr const char* kSemaphore = R"lua(
local n = tonumber(ARGV[2])
if ARGV[1] == 'acquire' then
  local value = tonumber(redis.call('get', KEYS[1]) or '0')
  if value >= n then
    redis.call('decrby', KEYS[1], n)
    return 1
  end
  return 0
end
local value = redis.call('incrby', KEYS[1], n)
redis.call('publish', KEYS[2], value)
return value
)lua";

// RPermitExpirableSemaphore. KEYS[1] count, KEYS[2] "{name}:timeout",
// KEYS[3] channel. ARGV: now, operation, ...
//   acquire  ARGV[3] = expiry (score), ARGV[4] = the id's 16 raw bytes:
//            'OK' when taken, else the earliest expiry (or -1).
//   release  ARGV[3] = the id's raw bytes: 1 if it was held, else 0.
//   add      ARGV[3] = n (addPermits): the count grows by n, which is
//            published; reply the new count.
inline constexpr const char* kPermitSemaphore = R"lua(
local now = tonumber(ARGV[1])
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then redis.call('publish', KEYS[3], value) end
end
if ARGV[2] == 'acquire' then
  local value = tonumber(redis.call('get', KEYS[1]) or '0')
  if value >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[3], ARGV[4])
    local pttl = redis.call('pttl', KEYS[1])
    if pttl > 0 then redis.call('pexpire', KEYS[2], pttl) end
    return redis.status_reply('OK')
  end
  local earliest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
  if earliest[1] == nil then return -1 end
  return tonumber(earliest[2])
end
if ARGV[2] == 'add' then
  local value = tonumber(redis.call('get', KEYS[1]) or '0') + tonumber(ARGV[3])
  redis.call('set', KEYS[1], value)
  redis.call('publish', KEYS[3], value)
  return value
end
local expiry = redis.call('zscore', KEYS[2], ARGV[3])
if expiry == false or tonumber(expiry) <= now then return 0 end
redis.call('zrem', KEYS[2], ARGV[3])
local value = redis.call('incrby', KEYS[1], 1)
redis.call('publish', KEYS[3], value)
return 1
)lua";

// ---- RReadWriteLock ----------------------------------------------------------
//
// One hash at the lock's name: 'mode' = 'read' | 'write', read field
// "<uuid>:<thread>" = read holds, write field "<uuid>:<thread>:write" =
// write holds. Each read hold k of an owner has a key
// "<tag>:<owner>:rwlock_timeout:<k>" with that hold's lease, <tag> = "{N}"
// (or N when it has a '{'). Releases on "redisson_rwlock:<tag>": "0" from
// the read half (wakes one waiter), "1" from the write half (wakes all).
// Redisson's arithmetic as the reference gives it, its quirks included: a
// read release sets the hash's ttl to its longest read hold, even below a
// downgrading writer's; a reentrant write adds its lease to the ttl; the
// read watchdog sets the hash's ttl to its own timeout.

// Read acquire. KEYS[1] hash, KEYS[2] the owner's timeout prefix
// "<tag>:<owner>:rwlock_timeout". ARGV: lease ms, read field, write field.
// nil when taken, else the hash's PTTL.
inline constexpr const char* kReadLockAcquire = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local mine = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if mode == 'read' or mine then
  local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. k, 1)
  redis.call('pexpire', KEYS[2] .. ':' .. k, ARGV[1])
  local left = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

// Read unlock with the latch. KEYS[1] hash, KEYS[2] channel, KEYS[3] the
// owner's timeout prefix, KEYS[4] <tag> (every owner's timeout keys are
// "<tag>:<field>:rwlock_timeout:<k>"), KEYS[5] latch. ARGV: message ("0"),
// read field, latch ms. nil: holds no read lock; 0: still held; 1: deleted
// (and published).
inline constexpr const char* kReadLockUnlock = R"lua(
local remembered = redis.call('get', KEYS[5])
if remembered ~= false then return tonumber(remembered) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('publish', KEYS[2], ARGV[1])
  redis.call('set', KEYS[5], 1, 'px', ARGV[3])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local holds = tonumber(redis.call('hget', KEYS[1], field))
    if type(holds) == 'number' then
      for k = holds, 1, -1 do
        longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[3])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[3])
return 1
)lua";

// Write acquire. KEYS[1] hash. ARGV: lease ms, write field. nil when taken
// (a reentrant take adds the lease to the PTTL), else the hash's PTTL.
inline constexpr const char* kWriteLockAcquire = R"lua(
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

// Write unlock with the latch. KEYS[1] hash, KEYS[2] channel, KEYS[3]
// latch. ARGV: message ("1"), internal lease ms (re-armed while holds
// remain), write field, latch ms. nil / 0 / 1 as the read unlock; the last
// write hold of an owner that still reads leaves the hash in read mode.
inline constexpr const char* kWriteLockUnlock = R"lua(
local remembered = redis.call('get', KEYS[3])
if remembered ~= false then return tonumber(remembered) end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('publish', KEYS[2], ARGV[1])
  redis.call('set', KEYS[3], 1, 'px', ARGV[4])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[4])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
)lua";

// The read watchdog (3.44+, ReadLockTask, one call for the client's read
// holds on one lock). KEYS[1] hash, KEYS[2] <tag>. ARGV: watchdog ms, then
// the read fields the client registered. Re-arms every timeout key of each
// field still there and sets the hash's ttl to the watchdog timeout (up
// or down); 1 if any field was there, else 0 (stop renewing).
inline constexpr const char* kReadLockRenew = R"lua(
local any = 0
for i = 2, #ARGV do
  local holds = tonumber(redis.call('hget', KEYS[1], ARGV[i]))
  if holds ~= nil then
    for k = holds, 1, -1 do
      redis.call('pexpire', KEYS[2] .. ':' .. ARGV[i] .. ':rwlock_timeout:' .. k, ARGV[1])
    end
    any = 1
  end
end
if any == 1 then redis.call('pexpire', KEYS[1], ARGV[1]) end
return any
)lua";

// The write watchdog (LockTask). KEYS[1] hash. ARGV: watchdog ms, write
// field. 1 and the hash's ttl set to the watchdog timeout (up or down) if
// the field is there, else 0. Read timeout keys are not touched.
inline constexpr const char* kWriteLockRenew = R"lua(
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
)lua";

// readLock().forceUnlock() / writeLock().forceUnlock(). KEYS[1] hash,
// KEYS[2] channel. ARGV: the half's mode ('read' | 'write'), its message
// ("0" | "1"). 1 if the hash was in that mode (deleted, published), else 0.
// Timeout keys are left to expire.
inline constexpr const char* kReadWriteForceUnlock = R"lua(
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[2])
  return 1
end
return 0
)lua";

}  // namespace turnstile::testing::redisson

#endif  // TURNSTILE_TESTS_SUPPORT_REDISSON_SCRIPTS_H_
