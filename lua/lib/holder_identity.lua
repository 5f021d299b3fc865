-- Shared: the holder's identity "turnstile_holder:{<name>}" (key_layout.h,
-- "The holder's identity"), turnstile's own key beside a lock with one
-- holder, never a field of the lock hash Redisson reads. Its expiry is the
-- lock's: set with a new holding, re-armed with the lock's lease, deleted
-- with the holding. A script arms the identity's expiry before the lock's,
-- never after: a server before Redis 7.2 times each PEXPIRE from its own
-- instant, not the script's, so an identity armed after the lock would
-- outlive it by the time between the two.
--
-- The one order of a lock script's optional trailing keys and arguments
-- (turnstile's own; Redisson's calls pass neither group, and a call with
-- neither gets every reply in its Redisson-era shape):
--   1. the holder's identity: its key right after the script's own KEYS
--      (an acquisition: its value right after the script's own ARGV);
--   2. the wake registry (lib/wake_registry.lua), only after the identity:
--      its key after the identity's (an acquisition: its four arguments,
--      channel, clock, waits, others, after the identity's value).
-- A call may pass the identity alone (turnstile always passes it; the
-- registry only with ClientOptions::wake_scope fleet), never the registry
-- alone. A call without the identity (an older turnstile, a test) keeps
-- none. The renew scripts take identities only (renewed_holder).

-- A holder whose release wakes the wake registry's processes (its call
-- passed the registry: lib/wake_registry.lua) says so on a line of its
-- identity's own, after the others (holder_identity_value's readers skip a
-- field they do not know): a waiter's failed try reads it there
-- (holder_recorded) instead of the holder keeping a record of its own in
-- the registry, which the path when nobody waits would pay for.
local WAKES_REGISTRY_LINE = '\nwakes=registry'

-- A holding's identity: a new one stored for `ttl_ms` (marked when the
-- holder's release wakes the registry); a reentrant one's re-armed (its
-- start kept).
local function note_holder(key, identity, ttl_ms, new_holding, wakes_registry)
  if key == nil then return end
  if new_holding then
    if wakes_registry then identity = identity .. WAKES_REGISTRY_LINE end
    redis.call('set', key, identity, 'px', ttl_ms)
  else
    redis.call('pexpire', key, ttl_ms)
  end
end

-- The identity re-armed with the lock's ttl, or deleted with the holding.
local function rearm_holder(key, ttl_ms)
  if key ~= nil then redis.call('pexpire', key, ttl_ms) end
end

local function forget_holder(key)
  if key ~= nil then redis.call('del', key) end
end

-- The lock `lock` deleted with its holder's identity, in one command.
local function delete_with_holder(lock, key)
  if key ~= nil then
    redis.call('del', lock, key)
  else
    redis.call('del', lock)
  end
end

-- A watchdog renewal of `count` locks (KEYS[1..count]) whose identities,
-- when given, are KEYS[count + 1 .. 2 * count]: lock i's, or nil.
local function renewed_holder(count, i)
  if #KEYS == 2 * count then return KEYS[count + i] end
  return nil
end

-- A crash-safe semaphore's permit has an identity of its own (many holders
-- at once, no one holder's key): "turnstile_holder:{<name>}:<id in hex>",
-- beside the held permits "{<name>}:timeout" `timeouts` (the same slot),
-- with the permit's lease as its expiry; `id` is the stored 16 raw bytes,
-- `id_hex` its hex when the caller has it (else made here, in one call).
local PERMIT_TIMEOUTS_SUFFIX = ':timeout'

local function permit_identity_key(timeouts, id, id_hex)
  local hex = id_hex or string.format(string.rep('%02x', #id), string.byte(id, 1, -1))
  return 'turnstile_holder:' .. string.sub(timeouts, 1, -#PERMIT_TIMEOUTS_SUFFIX - 1) .. ':' .. hex
end

-- The identities of permits ARGV[first..last] of the held permits
-- `timeouts` deleted (their release).
local function forget_permit_identities(timeouts, first, last)
  local keys = {}
  for i = first, last do keys[#keys + 1] = permit_identity_key(timeouts, ARGV[i]) end
  if #keys > 0 then redis.call('del', unpack(keys)) end
end

