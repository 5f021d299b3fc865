-- Crash-safe semaphore (Redisson RPermitExpirableSemaphore layout): every
-- operation but the watchdog's renewal, one script, so the key checks and
-- the reclaiming of expired permits are written once.
-- KEYS[1] available permits: an integer string (absent: 0)
-- KEYS[2] held permits: sorted set "{<name>}:timeout", permit id -> expiry
--         (Unix ms; Redisson's never-expires sentinel for permits without one).
--         A permit id is stored as its 16 raw bytes, as Redisson stores it
--         (callers are shown 32 hex digits); ids in ARGV are raw bytes too.
-- KEYS[3] wake-up channel "redisson_sc:{<name>}"
-- ARGV[1] now, Unix ms by the caller's clock (ids with expiry <= now are expired)
-- ARGV[2] publish command ("PUBLISH" or "SPUBLISH")
-- ARGV[3] the most expired ids one call reclaims (the rest: the next call)
-- ARGV[4] operation, one of:
--   acquire       ARGV[5] = n >= 1, ARGV[6] = expiry of the new permits,
--                 ARGV[7] = never-expires sentinel, ARGV[8 .. 7 + n] = new
--                 ids (distinct, random). All n or none. Reply {1, 0} when acquired;
--                 else {0, hint}: ms until the earliest held permit expires,
--                 0 if expired ids are left that this call could not
--                 reclaim (call again), -1 if none ever expires (wait for a
--                 message).
--   release       ARGV[5 ..] = ids (distinct). All or none. Reply {1, count}
--                 if every id was held and unexpired (released, waiters
--                 told); else {0, i}: ARGV[4 + i] is expired, released or
--                 unknown, and nothing was released.
--   update_lease  ARGV[5] = id, ARGV[6] = its new expiry. Reply 1 if it was
--                 held and unexpired (expiry set), else 0.
--   status        ARGV[5] = most held permits to list (0: counts only),
--                 ARGV[6] = never-expires sentinel. Reply {available, held,
--                 id, ms left, id, ms left, ...}, earliest expiry first; ms
--                 left -1 for a permit that never expires.
--   init_permits  ARGV[5] = total >= 0, set only if neither key exists.
--   set_permits   ARGV[5] = total >= 0, set whatever it was: available
--                 becomes total - held (negative if more are held; releases
--                 pay that back). Both reply {1 if the total was changed,
--                 the total now in force (available + held)}.
--   reset         Deletes the count and every held permit (an operator's
--                 reset: holders find their permits gone at their next
--                 renewal or release). Reply 1 if anything was there, else 0.
-- Any operation first reclaims expired permits (publishing the new count).
-- Optional, turnstile's own (fleet-wide wake-ups, lib/wake_registry.lua):
-- KEYS[4] the wake registry "turnstile_lock_wake:{<name>}". With it every
-- publish of a count that grew first wakes as many registered processes as
-- permits came (their own channels), and is signed (lib/wake_registry.lua,
-- tell_count). acquire then takes five more arguments after
-- its ids, ARGV[8 + n ..]: the caller's wake channel, its wall clock in ms,
-- '1' if a failure will wait, '1' if other waiters of its process still
-- wait, the longest a registered waiter sleeps before it tries again (ms);
-- a failure registers the process (if it will wait) and replies
-- {0, hint, 1} (a fleet waiter may ignore signed counts on the shared
-- channel: an unsigned one woke no registry); a success forgets
-- the process unless others of it wait, and replies {1, 0, 1} when
-- permits are left and others of its process wait (one of them tries:
-- a release between the one that woke this process, forgetting it, and
-- this try told only the shared channel).
-- KEYS[5] (only after KEYS[4]) the grants "turnstile_lock_grants:{<name>}":
-- direct handoff (lib/wake_registry.lua). A count that grows grants its
-- permits to the oldest registered processes' offers first (one each),
-- then wakes as above. acquire then takes three more arguments after the
-- five, ARGV[13 + n ..]: the caller's permit id in 32 hex digits, this
-- try's send instant on the caller's clock (opaque here), the lease in
-- ms; a waiting try for one permit leaves its process's offer, a success
-- withdraws it. One more operation:
--   give_back     ARGV[5] = id (raw), ARGV[6] = the id in hex, ARGV[7] =
--                 the process's wake channel, ARGV[8] = '1' if the
--                 process has no other waiter: a waiting acquisition ended
--                 without its permit. Its offer is withdrawn, the process
--                 forgotten if it was the last, and the permit granted to
--                 it and not taken is released as a release would, except
--                 that registered processes are woken, not granted. Reply
--                 1 if a permit was given back, else 0.
-- Optional, last of acquire's arguments (after the grants' three, else the
-- registry's five, else the ids): the holder's identity (key_layout.h,
-- "The holder's identity"), stored for each permit taken in
-- "turnstile_holder:{<name>}:<id in hex>" (lib/holder_identity.lua) with
-- the permit's lease, and put in its offer for a grant to store. release,
-- give_back and update_lease delete or re-arm the permits' identities.
-- A key of another type, or a count that is not an integer: WRONGTYPE,
-- nothing changed.
-- Hot path, nobody waiting: acquire makes 8 calls (GET, ZRANGE, ZSCORE,
-- DECRBY, ZADD, SET of the identity, EXISTS of the registry and grants,
-- PTTL), release of one id 7 (ZRANGE, ZSCORE, INCRBY, ZREM, DEL of the
-- identity, EXISTS, PUBLISH). The earliest expiry
-- (one ZRANGE) tells whether anything expired, so the reclaiming
-- ZRANGEBYSCORE runs only then, and a failed acquire reuses it for its hint.
-- Release does not GET the count: INCRBY, its first write, checks the type.
-- GET, ZRANGE and INCRBY raise WRONGTYPE on a key of another type, before
-- anything is written.
--! include holder_identity
--! include wake_registry
local operation = ARGV[4]
-- Redisson's expiry of a permit that never expires (semaphore.h,
-- PermitSemaphore::kNeverExpiresMs).
local PERMIT_NEVER_EXPIRES_MS = 922337203685477
local now = tonumber(ARGV[1])
local registry, grants = KEYS[4], KEYS[5]
-- How long the count's record lives (acquire names it; else the default).
local record_ms = 10000
local wrongtype = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local count = false
local available = 0
if operation ~= 'release' then
  count = redis.call('get', KEYS[1])
  if count and not string.match(count, '^%-?%d+$') then
    return redis.error_reply(wrongtype)
  end
  available = tonumber(count or '0')
end

-- INCRBY of the count, or nil and the error reply (WRONGTYPE for a count
-- that is not an integer, as GET's check reports it).
local function add_available(n)
  local result = redis.pcall('incrby', KEYS[1], n)
  if type(result) == 'table' and result.err then
    if string.find(result.err, 'not an integer', 1, true) or string.sub(result.err, 1, 9) == 'WRONGTYPE' then
      return nil, redis.error_reply(wrongtype)
    end
    return nil, result
  end
  return result
end

-- The count went from `before` to `after` (a turnstile change): if it
-- grew to above 0, the registered processes are woken, one per permit (the
-- caller then tells the shared channel, as without), if any is registered
-- (one existence check when nobody waits). With the grants, permits
-- granted to offers are taken from the count: returns the count left to
-- publish.
local function changed(before, after, wake_only)
  if registry == nil or after <= 0 or after <= before or redis.call('exists', registry) == 0 then return after end
  local granted = 0
  local grant_one = nil
  if grants ~= nil and not wake_only then
    grant_one = function(channel)
      local done = grant_permit_to_offer(registry, grants, KEYS[1], KEYS[2], channel, ARGV[2], now)
      if done then granted = granted + 1 end
      return done
    end
  end
  wake_for_permits(registry, ARGV[2], after - math.max(before, 0), after, grant_one)
  return after - granted
end

-- The shared channel told the count `count` after a turnstile change
-- (signed with the registry: lib/wake_registry.lua, tell_count).
local function tell(count)
  tell_count(ARGV[2], KEYS[3], count, registry ~= nil)
end

if operation == 'acquire' and registry ~= nil then
  record_ms = tonumber(ARGV[12 + tonumber(ARGV[5])])
end

-- acquire: the identity of the permits it takes, or nil; each stored with
-- the permits' lease (none for permits that never expire).
local identity = nil
if operation == 'acquire' then
  identity = ARGV[8 + tonumber(ARGV[5]) + (registry and 5 or 0) + (grants and 3 or 0)]
end
local function note_permit_holders(wanted)
  if identity == nil or identity == '' or tonumber(ARGV[6]) >= tonumber(ARGV[7]) then return end
  local lease_ms = math.max(tonumber(ARGV[6]) - now, 1)
  -- One permit with the grants: its hex is an argument already (ARGV[13 + n]).
  local hex = nil
  if grants ~= nil and wanted == 1 then hex = ARGV[13 + wanted] end
  for i = 1, wanted do
    redis.call('set', permit_identity_key(KEYS[2], ARGV[7 + i], hex), identity, 'px', lease_ms)
  end
end

local earliest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if earliest[1] ~= nil and tonumber(earliest[2]) <= now then
  local expired = redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1], 'limit', 0, ARGV[3])
  local total, failure = add_available(#expired)
  if total == nil then
    return failure
  end
  redis.call('zrem', KEYS[2], unpack(expired))
  available = changed(total - #expired, total)
  if available > 0 then tell(available) end
  earliest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
end

-- Whether `id` is held and unexpired.
local function held(id)
  local expiry = redis.call('zscore', KEYS[2], id)
  return expiry ~= false and tonumber(expiry) > now
end

local function set_total(only_if_absent)
  local held_count = redis.call('zcard', KEYS[2])
  local exists = count ~= false or held_count > 0
  local total = tonumber(ARGV[5])
  if exists and (only_if_absent or available + held_count == total) then
    return {0, available + held_count}
  end
  redis.call('set', KEYS[1], total - held_count)
  local left = changed(available, total - held_count)
  if left > 0 then tell(left) end
  return {1, total}
end

if operation == 'acquire' then
  local wanted = tonumber(ARGV[5])
  -- The ids are drawn once per acquisition: finding the first one held means
  -- this is a retry of a call that took them and whose reply was lost. Its
  -- expiry is re-armed; no more permits are taken.
  -- A permit granted to this acquisition (direct handoff) is taken so too.
  if redis.call('zscore', KEYS[2], ARGV[8]) then
    local members = {}
    for i = 1, wanted do
      members[2 * i - 1] = ARGV[6]
      members[2 * i] = ARGV[7 + i]
    end
    redis.call('zadd', KEYS[2], 'xx', unpack(members))
    note_permit_holders(wanted)
    if grants ~= nil then
      withdraw_offer(grants, ARGV[8 + wanted], ARGV[13 + wanted])
      after_success(registry, ARGV[8 + wanted], ARGV[9 + wanted], ARGV[11 + wanted], record_ms)
    end
    return {1, 0}
  end
  if available >= wanted then
    -- The ids are 128 random bits: not checked for collisions (nor does
    -- Redisson), so acquiring costs no call per id.
    local members = {}
    for i = 1, wanted do
      members[2 * i - 1] = ARGV[6]
      members[2 * i] = ARGV[7 + i]
    end
    redis.call('decrby', KEYS[1], wanted)
    redis.call('zadd', KEYS[2], unpack(members))
    note_permit_holders(wanted)
    local more = 0
    -- Nobody registered and no offer (one check when nobody waits), or
    -- the caller's process forgotten (kept while others of it wait) and
    -- its offer withdrawn.
    if registry ~= nil and (ARGV[11 + wanted] == '1' or redis.call('exists', registry, grants or registry) > 0) then
      after_success(registry, ARGV[8 + wanted], ARGV[9 + wanted], ARGV[11 + wanted], record_ms)
      if available - wanted > 0 and ARGV[11 + wanted] == '1' then more = 1 end
      if grants ~= nil then withdraw_offer(grants, ARGV[8 + wanted], ARGV[13 + wanted]) end
    end
    -- As Redisson: the held permits expire with the count if it has an
    -- expiry (a user's EXPIRE on the name), so nothing outlives it.
    local pttl = redis.call('pttl', KEYS[1])
    if pttl > 0 then
      redis.call('pexpire', KEYS[2], pttl)
    end
    if more == 1 then return {1, 0, 1} end
    return {1, 0}
  end
  local hint = -1
  if earliest[1] ~= nil and tonumber(earliest[2]) < tonumber(ARGV[7]) then
    hint = math.max(tonumber(earliest[2]) - now, 0)
  end
  if registry == nil then return {0, hint} end
  if ARGV[10 + wanted] == '1' then
    register_waiter(registry, ARGV[8 + wanted], ARGV[9 + wanted], record_ms)
    if wanted > 1 then wants_several(registry, record_ms) end
    if grants ~= nil and wanted == 1 then
      offer_grant(grants, ARGV[8 + wanted], ARGV[13 + wanted], ARGV[15 + wanted], ARGV[13 + wanted],
                  ARGV[14 + wanted], ARGV[11 + wanted], identity or '', record_ms)
    end
  end
  return {0, hint, 1}
elseif operation == 'release' then
  local seen = {}
  for i = 5, #ARGV do
    if seen[ARGV[i]] then
      return redis.error_reply('ERR permit id ' .. ARGV[i] .. ' is listed twice')
    end
    seen[ARGV[i]] = true
    if not held(ARGV[i]) then
      return {0, i - 4}
    end
  end
  local released = #ARGV - 4
  local total, failure = add_available(released)
  if total == nil then
    return failure
  end
  redis.call('zrem', KEYS[2], unpack(ARGV, 5))
  forget_permit_identities(KEYS[2], 5, #ARGV)
  tell(changed(total - released, total))
  return {1, released}
elseif operation == 'give_back' then
  if grants ~= nil then withdraw_offer(grants, ARGV[7], ARGV[6]) end
  if registry ~= nil and ARGV[8] == '1' then redis.call('zrem', registry, ARGV[7]) end
  if not held(ARGV[5]) then return 0 end
  local total, failure = add_available(1)
  if total == nil then
    return failure
  end
  redis.call('zrem', KEYS[2], ARGV[5])
  forget_permit_identities(KEYS[2], 5, 5)
  -- The next registered process is woken, not granted: only a holder's
  -- own release hands its permits on in the same call.
  tell(changed(total - 1, total, true))
  return 1
elseif operation == 'update_lease' then
  if not held(ARGV[5]) then
    return 0
  end
  redis.call('zadd', KEYS[2], 'xx', ARGV[6], ARGV[5])
  local holder = permit_identity_key(KEYS[2], ARGV[5])
  if tonumber(ARGV[6]) >= PERMIT_NEVER_EXPIRES_MS then
    redis.call('persist', holder)
  else
    redis.call('pexpire', holder, math.max(tonumber(ARGV[6]) - now, 1))
  end
  return 1
elseif operation == 'status' then
  local reply = {available, redis.call('zcard', KEYS[2])}
  local limit = tonumber(ARGV[5])
  if limit > 0 then
    local listed = redis.call('zrange', KEYS[2], 0, limit - 1, 'withscores')
    for i = 1, #listed, 2 do
      local expiry = tonumber(listed[i + 1])
      reply[#reply + 1] = listed[i]
      if expiry >= tonumber(ARGV[6]) then
        reply[#reply + 1] = -1
      else
        reply[#reply + 1] = math.max(expiry - now, 0)
      end
    end
  end
  return reply
elseif operation == 'init_permits' then
  return set_total(true)
elseif operation == 'set_permits' then
  return set_total(false)
elseif operation == 'reset' then
  return redis.call('del', KEYS[1], KEYS[2]) > 0 and 1 or 0
end
return redis.error_reply('ERR unknown permit semaphore operation ' .. tostring(operation))
