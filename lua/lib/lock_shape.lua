-- Shared: what a lock of each flavor looks like (included by the scripts
-- that must refuse a key that is not a lock before waiting on it or
-- deleting it). The C++ twin is src/locks/key_layout.cpp
--   owner id    "<uuid>:<n>" (Redisson's: a client's UUID, a thread id)
--   lock hash   every field an owner id, every value a hold count >= 1,
--               and an expiry
--   token       "<uuid>:<32 hex digits>" (turnstile's token lock), and an
--               expiry
local HEX4 = '%x%x%x%x'
local UUID = HEX4 .. HEX4 .. '%-' .. HEX4 .. '%-' .. HEX4 .. '%-' .. HEX4 .. '%-' .. HEX4 .. HEX4 .. HEX4
local OWNER_ID = '^' .. UUID .. ':%d+$'
local TOKEN = '^' .. UUID .. ':' .. string.rep('%x', 32) .. '$'

-- Whether the hash at `key` is a lock hash (Redisson RLock / RFairLock).
local function is_lock_hash(key)
  if redis.call('pttl', key) < 0 then return false end
  local flat = redis.call('hgetall', key)
  if #flat == 0 then return false end
  for i = 1, #flat, 2 do
    if not string.find(flat[i], OWNER_ID) or not string.find(flat[i + 1], '^[1-9]%d*$') then
      return false
    end
  end
  return true
end

-- Whether the string at `key` is a token lock's token.
local function is_lock_token(key)
  if redis.call('pttl', key) < 0 then return false end
  return string.find(redis.call('get', key), TOKEN) ~= nil
end

-- The one-line refusal of a key that is not a lock of this flavor.
local function not_a_lock(key, kind)
  return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ' that is not a lock of this flavor')
end

-- Whether the hash at `key` is a read-write lock (Redisson
-- RReadWriteLock): a 'mode' field of 'read' or 'write', every other field
-- an owner id (a writer's with ':write' after it) with a hold count.
local function is_read_write_hash(key)
  local mode = redis.call('hget', key, 'mode')
  if mode ~= 'read' and mode ~= 'write' then return false end
  local flat = redis.call('hgetall', key)
  for i = 1, #flat, 2 do
    if flat[i] ~= 'mode' then
      local owner = string.gsub(flat[i], ':write$', '')
      if not string.find(owner, OWNER_ID) or not string.find(flat[i + 1], '^[1-9]%d*$') then
        return false
      end
    end
  end
  return true
end
