-- Shared: the read-write lock's fleet-wide wake-ups, over the registry of
-- lib/wake_registry.lua (included before this one; docs/redisson-interop.md,
-- "Fleet-wide wake-ups"). The same zset "turnstile_lock_wake:{<name>}"
-- holds, by kind:
--   a writer's process   member = its wake channel, score = when it
--                        registered (>= 1)
--   a reader's process   member = its wake channel .. ':read', the same
--                        score (a process with both kinds waiting has both)
--   holder records       member = "=<field>" at score 0 for every hold a
--                        turnstile client took (a reader's owner id, a
--                        writer's "<owner id>:write"), forgotten with it
-- A release that frees the lock serves the oldest registration, whatever
-- its kind: a writer's process is told "w" (it wakes one writer), and a
-- reader's makes every registered reader's process be told "r" (each
-- wakes all its readers). Neither kind starves the other of wake-ups. A
-- write release that leaves the lock in read mode (a downgrade), and a
-- reader that gets in, tell the readers' processes; a read release that
-- leaves readers wakes nobody.
-- (READ_SUFFIX, is_reader_member and process_channel: lib/wake_registry.lua.)
-- Reader processes told by one release at most (the rest retry by their
-- timers, as after a lost message).
local READERS_PER_RELEASE = 1000

local function rw_member(channel, reads)
  if reads then return channel .. READ_SUFFIX end
  return channel
end

-- A failed try of a reader (`reads`) or a writer: registers its process
-- for that kind (lib/wake_registry.lua, register_waiter).
local function register_rw_waiter(key, channel, reads, now_ms, sleep_ms)
  register_waiter(key, rw_member(channel, reads), now_ms, sleep_ms)
end

-- A success of hold `field`: records it as turnstile's. A writer's
-- process stays registered while other waiters of it still wait (`others`
-- '1'); a reader's is forgotten (the reader that got in wakes its
-- process's other readers), and a process with no waiter left is
-- forgotten for both kinds.
local function rw_acquired(key, field, channel, reads, now_ms, others, lease_ms)
  redis.call('zadd', key, 0, '=' .. field)
  registry_lives(key, tonumber(lease_ms) + REGISTRY_MARGIN_MS)
  if others ~= '1' then
    redis.call('zrem', key, channel, channel .. READ_SUFFIX)
  elseif reads then
    redis.call('zrem', key, channel .. READ_SUFFIX)
  else
    register_waiter(key, channel, now_ms, lease_ms)
  end
end

-- Whether every hold of lock hash `lock` is turnstile's with the registry
-- (false with a foreign one: its release may publish on the shared
-- channel only): a writer's by its identity at `identity_key` (marked by
-- holder_identity.lua's note_holder) or its record, a reader's by its
-- record. A hold taken when nobody waited has no record: a reader's counts
-- as foreign (its release is heard on the shared channel).
local function rw_holders_recorded(key, lock, identity_key)
  for _, field in ipairs(redis.call('hkeys', lock)) do
    if field ~= 'mode' and not redis.call('zscore', key, '=' .. field) then
      local writer = string.match(field, '^(.*):write$')
      if writer == nil or not holder_recorded_as(identity_key, writer) then return false end
    end
  end
  return true
end

-- Whether the read-write lock hash `lock` is in `mode` with one hold, of
-- `field` (one HGETALL: the path when nobody waits).
local function sole_hold(lock, mode, field)
  local flat = redis.call('hgetall', lock)
  if #flat ~= 4 then return false end
  local fields = {[flat[1]] = flat[2], [flat[3]] = flat[4]}
  return fields['mode'] == mode and fields[field] == '1'
end

-- Hold `field` is gone.
local function rw_released(key, field)
  if key ~= nil then redis.call('zrem', key, '=' .. field) end
end

-- Tells every registered reader's process `message` (at most
-- READERS_PER_RELEASE) and forgets them: "r" when the lock is free (a
-- process whose readers are gone wakes another waiter), "s" when it is in
-- read mode (readers only). Returns how many listened.
local function wake_rw_readers(key, publish, message)
  local reached = 0
  for _, member in ipairs(redis.call('zrangebyscore', key, '(0', '+inf', 'limit', 0, READERS_PER_RELEASE)) do
    if is_reader_member(member) then
      redis.call('zrem', key, member)
      reached = reached + redis.call(publish, process_channel(member), message)
    end
  end
  return reached
end

-- A reader's success: rw_acquired, then the registered readers' processes
-- are told "s" (the lock is in read mode: they may come in too; a reader
-- that gets in wakes the fleet's other readers, as its process's).
local function rw_read_acquired(key, field, channel, now_ms, others, lease_ms, publish)
  rw_acquired(key, field, channel, true, now_ms, others, lease_ms)
  wake_rw_readers(key, publish, 's')
end

-- The lock is free (deleted): forgets the holder records, then serves the
-- oldest registration (see above), skipping processes nobody listens for;
-- each pass forgets one registration at least, WAKE_TRIES passes at most.
-- Returns whether one was reached.
local function wake_rw_free(key, publish)
  if key == nil then return false end
  redis.call('zremrangebyscore', key, 0, 0)
  for _ = 1, WAKE_TRIES do
    local oldest = redis.call('zrangebyscore', key, '(0', '+inf', 'limit', 0, 1)[1]
    if oldest == nil then return false end
    if is_reader_member(oldest) then
      if wake_rw_readers(key, publish, 'r') > 0 then return true end
    else
      redis.call('zrem', key, oldest)
      if redis.call(publish, oldest, 'w') > 0 then return true end
    end
  end
  return false
end
