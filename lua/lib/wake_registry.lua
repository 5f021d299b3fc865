-- Shared: fleet-wide wake-ups (turnstile's own key beside Redisson's
-- layout; docs/redisson-interop.md, "Fleet-wide wake-ups"). One zset per
-- lock, "turnstile_lock_wake:{<name>}", in the lock's slot:
--   waiting processes  member = the process's wake channel
--                      "turnstile_lock_wake:{<name>}:<client uuid>",
--                      score = when it registered (the caller's wall
--                      clock in ms, >= 1): the oldest is woken first
--   holder record      member = "=<owner id>", score 0: the lock's
--                      current holder is a turnstile client, whose
--                      release wakes a registered process (at most one
--                      record: a new one replaces the old)
-- A release pops registered processes oldest first and publishes "0" on
-- each one's channel until a PUBLISH reaches a subscriber (a process with
-- no waiter left has dropped its subscription, a dead one has lost its
-- connection: both are skipped and forgotten), at most WAKE_TRIES of them.
-- The key expires by itself (REGISTRY_MARGIN_MS beyond the longest sleep a
-- registered waiter takes before it tries, and registers, again).
-- A script takes the registry's key (and an acquisition its arguments)
-- after the holder's identity's: lib/holder_identity.lua, "The one order".
local WAKE_TRIES = 4
local REGISTRY_MARGIN_MS = 10000

-- Lets `key` live at least `ttl_ms` more.
local function registry_lives(key, ttl_ms)
  if redis.call('pttl', key) < ttl_ms then
    redis.call('pexpire', key, ttl_ms)
  end
end

-- Registers the waiting process of `channel` at `now_ms` (kept at its
-- place when it is registered already); the caller will try again within
-- `sleep_ms`.
local function register_waiter(key, channel, now_ms, sleep_ms)
  redis.call('zadd', key, 'nx', math.max(1, tonumber(now_ms)), channel)
  registry_lives(key, tonumber(sleep_ms) + REGISTRY_MARGIN_MS)
end

-- After a success: the caller's process stays registered while other
-- waiters of it still wait (`others` '1'), else it is forgotten (a process
-- with no waiter must not be picked: its channel may linger subscribed).
local function after_success(key, channel, now_ms, others, lease_ms)
  if others == '1' then
    register_waiter(key, channel, now_ms, lease_ms)
  else
    redis.call('zrem', key, channel)
  end
end

-- Records `owner` (a turnstile owner that has just acquired for
-- `lease_ms`) as the holder.
local function record_holder(key, owner, lease_ms)
  redis.call('zremrangebyscore', key, 0, 0)
  redis.call('zadd', key, 0, '=' .. owner)
  registry_lives(key, tonumber(lease_ms) + REGISTRY_MARGIN_MS)
end

-- Whether the one owner of lock hash `lock` is the recorded turnstile
-- holder (false for several owners or a foreign one: its release may
-- publish only on the shared channel).
local function holder_recorded(key, lock)
  local owners = redis.call('hkeys', lock)
  if #owners ~= 1 then return false end
  return redis.call('zscore', key, '=' .. owners[1]) ~= false
end

-- A release: forgets the holder record, then wakes the oldest registered
-- process that still listens. Returns whether one was reached.
local function wake_registered(key, publish)
  redis.call('zremrangebyscore', key, 0, 0)
  for _ = 1, WAKE_TRIES do
    local oldest = redis.call('zrangebyscore', key, '(0', '+inf', 'limit', 0, 1)[1]
    if oldest == nil then return false end
    redis.call('zrem', key, oldest)
    if redis.call(publish, oldest, '0') > 0 then return true end
  end
  return false
end

-- Semaphores (counting and crash-safe). No holder: the record at score 0
-- is the count turnstile expects available, member "#<count>": set by a
-- turnstile script that sets the count, moved by each turnstile change by
-- as much as it changed the count. A count that differs from it was
-- changed by a foreign client, which may still hold permits (Redisson's
-- release publishes on the shared channel only): a failed try that finds
-- the expected count knows the next release is turnstile's, which wakes
-- registered processes. A foreign acquisition given back restores the
-- expected count, as it should: nothing foreign is held then.

-- The expected count becomes `count` (a turnstile script set it); it
-- lives as long as a registered waiter sleeps at most.
local function record_count(key, count, sleep_ms)
  redis.call('zremrangebyscore', key, 0, 0)
  redis.call('zadd', key, 0, '#' .. tostring(count))
  registry_lives(key, tonumber(sleep_ms) + REGISTRY_MARGIN_MS)
end

-- A turnstile change moved the count by `delta` to `count`: so moves the
-- expected count (without a record, the count is taken as expected).
local function shift_count(key, delta, count, sleep_ms)
  local expected = count
  for _, member in ipairs(redis.call('zrangebyscore', key, 0, 0, 'limit', 0, 1)) do
    if string.sub(member, 1, 1) == '#' then expected = tonumber(string.sub(member, 2)) + delta end
  end
  record_count(key, expected, sleep_ms)
end

-- Whether `count` is the one turnstile expects.
local function count_recorded(key, count)
  return redis.call('zscore', key, '#' .. tostring(count)) ~= false
end

-- A failed try for more than one permit: marks the registry (member
-- "*several", score -1, for as long as the registration) so that releases
-- tell every registered process, as without the registry: a wake-up
-- handed to a process whose waiters want more than is free would stop
-- there, and a waiter for fewer elsewhere would sleep beside free permits.
local function wants_several(key, sleep_ms)
  redis.call('zadd', key, -1, '*several')
  registry_lives(key, tonumber(sleep_ms) + REGISTRY_MARGIN_MS)
end

-- A release of `permits`, leaving `count` free: wakes that many waiters of
-- the fleet (every registered process while one wants several), one per
-- registered process oldest first (its own channel's message is how many
-- of its waiters to wake: 1, and for the last registered process all
-- that are left), skipping (and forgetting) at most WAKE_TRIES processes
-- nobody listens for. Each pass forgets one process: bounded by the
-- registry. Returns how many wake-ups reached a process.
local function wake_for_permits(key, publish, permits, count)
  if redis.call('zscore', key, '*several') then
    -- Every registered process hears how many are free, `count` (each
    -- wakes up to that many of its waiters), and is forgotten until its
    -- next try.
    local everyone = redis.call('zrangebyscore', key, '(0', '+inf')
    redis.call('zremrangebyscore', key, '(0', '+inf')
    for _, channel in ipairs(everyone) do redis.call(publish, channel, tostring(count)) end
    return permits
  end
  local left, misses = permits, 0
  while left > 0 and misses < WAKE_TRIES do
    local oldest = redis.call('zrangebyscore', key, '(0', '+inf', 'limit', 0, 1)[1]
    if oldest == nil then break end
    redis.call('zrem', key, oldest)
    local wakes = 1
    if redis.call('zcount', key, '(0', '+inf') == 0 then wakes = left end
    if redis.call(publish, oldest, tostring(wakes)) > 0 then
      left = left - wakes
    else
      misses = misses + 1
    end
  end
  return permits - left
end
