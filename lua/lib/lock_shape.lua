-- Shared: what a lock of each flavor looks like (included by the scripts
-- that must refuse a key that is not a lock before waiting on it or
-- deleting it). The C++ twin is src/locks/handles/key_layout.cpp
-- (is_held_lock_hash, is_lock_hash, is_lock_token).
--   hold count  a decimal integer >= 1
--   held lock hash  every value a hold count, and an expiry: Redisson's
--               scripts take any field for an owner, so this is a lock
--               held by someone (turnstile, Redisson, node-redisson,
--               Redisson's transactions...): waited on
--   lock hash   a held lock hash whose every field is client-owned,
--               "<uuid>:<anything>" (turnstile and Redisson "<uuid>:<n>",
--               node-redisson "<uuid>:<uuid>", Redisson's transactions
--               "<uuid>:<thread>:<32 hex>"): may be force-unlocked
--   token       "<uuid>:<32 hex digits>" (turnstile's token lock), and an
--               expiry
-- The patterns are written out, not built by concatenation: every call of
-- every script that includes this part would build them again.
--   CLIENT_OWNED  '^' .. UUID .. ':.'
--   TOKEN         '^' .. UUID .. ':' .. 32 hex digits .. '$'
-- where UUID is 8-4-4-4-12 hex digits ('%x' each, '%-' between groups).
local CLIENT_OWNED = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x:.'
local TOKEN =
  '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x:%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x$'
local HOLD_COUNT = '^[1-9]%d*$'

-- Whether the fields and values of a lock hash (flat, as HGETALL lists
-- them) have a lock's shape: every value a hold count, and with
-- `client_owned` every field "<uuid>:..." too. With `mode_allowed` a
-- read-write lock's 'mode' field (read or write) is let pass.
local function is_lock_fields(flat, client_owned, mode_allowed)
  for i = 1, #flat, 2 do
    local mode = mode_allowed and flat[i] == 'mode' and (flat[i + 1] == 'read' or flat[i + 1] == 'write')
    if not mode and
        (not string.find(flat[i + 1], HOLD_COUNT) or (client_owned and not string.find(flat[i], CLIENT_OWNED))) then
      return false
    end
  end
  return true
end

-- Whether the hash at `key` is a lock held by anyone: a held lock hash,
-- above (Redisson RLock / RFairLock layout), or a held read-write lock
-- (RReadWriteLock layout, its 'mode' let pass). A plain lock waits on a
-- read-write lock of the same name, and the read-write scripts wait on a
-- plain lock (held_hash_pttl below), so that `turnstile run NAME` and
-- `run -x NAME` (or `-s`) exclude each other on one name. (The C++ twin
-- reads one layout at a time: it tells `status` which one it is.)
local function is_held_hash(key)
  if redis.call('pttl', key) < 0 then return false end
  local flat = redis.call('hgetall', key)
  return #flat > 0 and is_lock_fields(flat, false, true)
end

-- Whether the hash at `key` is a lock hash that may be force-unlocked:
-- every field client-owned as well.
local function is_lock_hash(key)
  if redis.call('pttl', key) < 0 then return false end
  local flat = redis.call('hgetall', key)
  return #flat > 0 and is_lock_fields(flat, true, false)
end

-- A token lock's value is its token, followed by WAITERS_MARK once
-- somebody may wait for it: a try that found it held, or a holder that
-- took it while processes were registered (token_lock_acquire.lua). Like
-- a futex's waiters bit, it tells the release whether to wake anyone: an
-- unmarked lock is released by a compare-and-delete alone.
local WAITERS_MARK = '+w'

-- The token of a token lock's value, its mark (if any) taken off.
local function token_of(value)
  if string.sub(value, -#WAITERS_MARK) == WAITERS_MARK then return string.sub(value, 1, -#WAITERS_MARK - 1) end
  return value
end

-- Whether `value` has a token lock's value's shape (its expiry aside).
local function is_token_value(value)
  return string.find(token_of(value), TOKEN) ~= nil
end

-- Whether the string at `key` is a token lock's token.
local function is_lock_token(key)
  if redis.call('pttl', key) < 0 then return false end
  return is_token_value(redis.call('get', key))
end

-- The pttl of a hash that a failed try found held by another owner, or
-- false if it is not a held lock hash (refused). Its full shape (every
-- value a hold count: HGETALL) is read only where it can be wrong: on the
-- first try of an acquisition (`check_shape` is anything but '0'), or
-- when the key has no expiry, which no held lock lacks. The retries of a
-- waiter on a held lock, the path a herd multiplies, read its PTTL only.
local function held_hash_pttl(key, kind, check_shape)
  if kind ~= 'hash' then return false end
  local pttl = redis.call('pttl', key)
  if pttl < 0 or (check_shape ~= '0' and not is_held_hash(key)) then return false end
  return pttl
end

-- Whether `owner` holds the plain lock hash `key` already (a reentrant
-- acquisition adds a hold): its field is there and the hash has no
-- 'mode'. A read-write lock's reader field of the same owner is no plain
-- hold: it excludes the plain lock as any reader does (is_held_hash).
local function holds_plain(key, owner)
  return redis.call('hexists', key, owner) == 1 and redis.call('hexists', key, 'mode') == 0
end

-- The one-line refusal of a key that is not a lock of this flavor.
local function not_a_lock(key, kind)
  return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ' that is not a lock of this flavor')
end

-- Whether the hash at `key` is a read-write lock (Redisson
-- RReadWriteLock): a 'mode' field of 'read' or 'write', every other field
-- an owner (a writer's with ':write' after it) with a hold count; with
-- `client_owned` (force-unlock) every owner "<uuid>:..." too.
local function is_read_write_hash(key, client_owned)
  local mode = redis.call('hget', key, 'mode')
  if mode ~= 'read' and mode ~= 'write' then return false end
  local flat = redis.call('hgetall', key)
  local others = {}
  for i = 1, #flat, 2 do
    if flat[i] ~= 'mode' then
      others[#others + 1] = flat[i]
      others[#others + 1] = flat[i + 1]
    end
  end
  return is_lock_fields(others, client_owned, false)
end

-- Whether the hash at `key` may be taken for a read-write lock by a try:
-- a 'mode' of 'read' or 'write', and, unless `check_shape` is '0' (an
-- earlier try of this acquisition read the whole shape), every other field
-- an owner with a hold count (is_read_write_hash).
local function looks_read_write(key, check_shape)
  if check_shape ~= '0' then return is_read_write_hash(key, false) end
  local mode = redis.call('hget', key, 'mode')
  return mode == 'read' or mode == 'write'
end
