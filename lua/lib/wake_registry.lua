-- Shared: fleet-wide wake-ups (turnstile's own key beside Redisson's
-- layout; docs/redisson-interop.md, "Fleet-wide wake-ups"). One zset per
-- lock, "turnstile_lock_wake:{<name>}", in the lock's slot:
--   waiting processes  member = the process's wake channel
--                      "turnstile_lock_wake:{<name>}:<client uuid>",
--                      score = when it registered (the caller's wall
--                      clock in ms, >= 1): the oldest is woken first
-- Whether a lock's holder is a turnstile client whose release wakes a
-- registered process is told by its identity (lib/holder_identity.lua,
-- note_holder's mark), not by a record here: the path when nobody waits
-- writes nothing to the registry (free_and_unwatched).
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
-- A read-write lock registers a process's readers as its channel with
-- READ_SUFFIX after it (lib/read_write_wake.lua). A plain lock and a
-- read-write lock of one name wait on each other (lib/lock_shape.lua,
-- is_held_hash), so a plain release may pop a reader's registration: it
-- tells the process on its channel (process_channel).
local READ_SUFFIX = ':read'

local function is_reader_member(member)
  return string.sub(member, -#READ_SUFFIX) == READ_SUFFIX
end

-- The wake channel of the process a registration `member` names.
local function process_channel(member)
  if is_reader_member(member) then return string.sub(member, 1, -#READ_SUFFIX - 1) end
  return member
end

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

-- Whether lock `lock` is free with no process registered for it in
-- `registry` and no offer or grant in `grants` (either may be nil): the
-- path when nobody waits, told by one command for the three keys. An
-- acquisition that finds it so has nothing to settle in the registry.
local function free_and_unwatched(lock, registry, grants)
  return redis.call('exists', lock, registry or lock, grants or lock) == 0
end

-- Whether `owner` is the holder the identity at `identity_key` describes,
-- a turnstile holder whose release wakes the registry (its mark).
-- Whether the one owner of lock hash `lock` is such a holder (false for
-- several owners or a foreign one: its release may publish only on the
-- shared channel).
local function holder_recorded_as(identity_key, owner)
  if identity_key == nil then return false end
  local identity = redis.pcall('get', identity_key)
  return type(identity) == 'string' and string.find(identity, '\nowner=' .. owner .. '\n', 1, true) ~= nil and
             string.find(identity, WAKES_REGISTRY_LINE, 1, true) ~= nil
end

local function holder_recorded(identity_key, lock)
  if identity_key == nil then return false end
  local owners = redis.call('hkeys', lock)
  return #owners == 1 and holder_recorded_as(identity_key, owners[1])
end

-- A release: wakes the oldest registered process that still listens.
-- Returns whether one was reached.
local function wake_registered(key, publish)
  for _ = 1, WAKE_TRIES do
    local oldest = redis.call('zrangebyscore', key, '(0', '+inf', 'limit', 0, 1)[1]
    if oldest == nil then return false end
    redis.call('zrem', key, oldest)
    if redis.call(publish, process_channel(oldest), '0') > 0 then return true end
  end
  return false
end

-- Semaphores (counting and crash-safe). A release made by a script with
-- the registry wakes registered processes on their own channels, then
-- tells the shared channel signed (tell_count); a release that woke no
-- registry (Redisson's, or a turnstile client's without fleet-wide
-- wake-ups) tells it unsigned. A fleet waiter ignores the signed counts
-- (its process was woken, or another was) and wakes for the others.

-- Tells the shared channel `channel` (Redisson's waiters listen there)
-- the count after a turnstile change; a positive one as "+<count>" when
-- `signed` (the change woke the registry): Redisson reads it as the count
-- (Java's Long.valueOf takes the sign), turnstile's fleet processes know
-- it for a release that has woken registered processes on their own
-- channels, and wake for a count without the sign (a release that woke
-- none, whoever made it).
local function tell_count(publish, channel, count, signed)
  if count > 0 and signed then
    redis.call(publish, channel, '+' .. tostring(count))
  else
    redis.call(publish, channel, count)
  end
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
-- registry. With `grant_one` (the crash-safe semaphore's direct handoff),
-- each popped process is first offered a permit: grant_one(channel)
-- returns true if it granted one (that process reached for one permit),
-- false if the process had an offer but nobody listens (skipped), nil
-- without an offer (woken as above). Returns how many wake-ups and grants
-- reached a process.
local function wake_for_permits(key, publish, permits, count, grant_one)
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
    local granted = nil
    if grant_one ~= nil then granted = grant_one(oldest) end
    if granted == true then
      left = left - 1
    elseif granted == false then
      misses = misses + 1
    else
      local wakes = 1
      if redis.call('zcount', key, '(0', '+inf') == 0 then wakes = left end
      if redis.call(publish, oldest, tostring(wakes)) > 0 then
        left = left - wakes
      else
        misses = misses + 1
      end
    end
  end
  return permits - left
end

-- Direct handoff to a registered process (reentrant lock; docs/safety.md,
-- "Direct handoff"). Beside the registry, the grants hash
-- "turnstile_lock_grants:{<name>}" (turnstile's own, in the lock's slot):
--   <process wake channel> -> "w:<lease ms>:<acquisition>:<sent>:<others>:<owner>|<identity>"
--                the process's offer, left by the waiting try of its
--                oldest waiting task `owner` ("<uuid>:<task>"), which takes
--                a grant for <lease> ms; <sent> is that try's send instant
--                on the waiter's own (the process's) clock (compared only
--                with the same process's, echoed in the grant: the waiter
--                times its lease from it); <others> '1' if other tasks of
--                the process were waiting since (it stays registered)
--   <owner>   -> "g:<acquisition>" granted and not yet confirmed: a try
--                of that acquisition arriving after the grant takes it
--                without a second hold; its give-up gives it back
-- The hash expires with the registry (its offers are as old as the
-- registrations). A grant is made only when its message reaches a
-- subscriber, so only a process that listens is ever granted.
local GRANT_PREFIX = 'turnstile:grant:'
local OFFER_PATTERN = '^w:(%d+):(%x+):(%-?%d+):([01]):([^|]*)|(.*)$'

-- A waiting try of `owner` (acquisition `acquisition`, sent at `sent`)
-- leaves its process's offer: the process's oldest waiting task's stands
-- (each of its tries renews it), unless it is stale (sent more than two
-- of its leases before this try, on the same process clock: its task
-- would have tried again by then, so it has gone without withdrawing it).
local function offer_grant(grants, channel, owner, lease, acquisition, sent, others, identity, sleep_ms)
  local standing = redis.call('hget', grants, channel)
  if standing ~= false then
    local standing_lease, standing_acquisition, standing_sent, _, offered_by, standing_identity =
        string.match(standing, OFFER_PATTERN)
    if offered_by ~= nil and offered_by ~= owner and
        tonumber(sent) - tonumber(standing_sent) <= 2 * tonumber(standing_lease) * 1000000 then
      -- This task waits too: the granted process stays registered.
      redis.call('hset', grants, channel,
                 'w:' .. standing_lease .. ':' .. standing_acquisition .. ':' .. standing_sent .. ':1:' .. offered_by ..
                     '|' .. standing_identity)
      registry_lives(grants, tonumber(sleep_ms) + REGISTRY_MARGIN_MS)
      return
    end
  end
  redis.call('hset', grants, channel,
             'w:' .. lease .. ':' .. acquisition .. ':' .. sent .. ':' .. others .. ':' .. owner .. '|' .. identity)
  registry_lives(grants, tonumber(sleep_ms) + REGISTRY_MARGIN_MS)
end

-- The process's offer on `channel` is dropped if it is `owner`'s (that
-- acquisition has ended: acquired by a try, or given up).
local function withdraw_offer(grants, channel, owner)
  local offer = redis.call('hget', grants, channel)
  if offer == false then return end
  local _, _, _, _, offered_by = string.match(offer, OFFER_PATTERN)
  if offered_by == owner then redis.call('hdel', grants, channel) end
end

-- Whether `owner`'s try for `acquisition`, `owner` holding the lock, finds
-- it granted to that acquisition: taken then (the lease re-armed from this
-- try, the marker gone), without a second hold. A marker of another
-- acquisition is stale: dropped (its hold, if any, is an ordinary hold
-- of the owner's, given back as a stale one).
local function taken_grant(grants, lock, owner, acquisition, lease, identity_key)
  local marker = redis.call('hget', grants, owner)
  if marker == false then return false end
  redis.call('hdel', grants, owner)
  if marker ~= 'g:' .. acquisition or redis.call('hexists', lock, owner) == 0 then return false end
  rearm_holder(identity_key, lease)
  redis.call('pexpire', lock, lease)
  return true
end

-- Grants the free lock hash `lock` to the offer of the registered process
-- `channel` (popped already, its registration score `score`) if it has
-- one and its message reaches a subscriber: the hash gets the owner's hold
-- and the offered lease (from now: at least what the grantee believes,
-- timed from its try's send instant), its identity is set, marked as a
-- holder whose release wakes the registry. Returns nil without an offer,
-- else whether it was granted (false: nobody listens).
local function grant_to_offer(registry, grants, lock, identity_key, channel, score, publish, now_ms)
  local offer = redis.call('hget', grants, channel)
  if offer == false then return nil end
  redis.call('hdel', grants, channel)
  local lease, acquisition, sent, others, owner, identity = string.match(offer, OFFER_PATTERN)
  if lease == nil then return nil end
  if redis.call(publish, channel, GRANT_PREFIX .. acquisition .. ':' .. sent) == 0 then return false end
  redis.call('hincrby', lock, owner, 1)
  if identity ~= '' then note_holder(identity_key, identity, lease, true, true) end
  redis.call('pexpire', lock, lease)
  redis.call('hset', grants, owner, 'g:' .. acquisition)
  registry_lives(grants, tonumber(lease) + REGISTRY_MARGIN_MS)
  -- Its other waiters wait on: the process stays registered, last in line
  -- (as a success by a try leaves it).
  if others == '1' then
    redis.call('zadd', registry, math.max(1, tonumber(now_ms or score)), channel)
  end
  return true
end

-- A release that freed lock hash `lock`: wake_registered(), except that the
-- oldest registered process that left an offer is granted the lock
-- (grant_to_offer) instead of told. Returns whether one was reached.
local function grant_or_wake(registry, grants, lock, identity_key, publish, now_ms)
  if grants == nil then return wake_registered(registry, publish) end
  for _ = 1, WAKE_TRIES do
    local oldest = redis.call('zrangebyscore', registry, '(0', '+inf', 'limit', 0, 1, 'withscores')
    if oldest[1] == nil then return false end
    redis.call('zrem', registry, oldest[1])
    local granted = grant_to_offer(registry, grants, lock, identity_key, oldest[1], oldest[2], publish, now_ms)
    if granted == true then return true end
    if granted == nil and redis.call(publish, process_channel(oldest[1]), '0') > 0 then return true end
  end
  return false
end

-- The crash-safe semaphore's direct handoff (docs/safety.md, "Direct
-- handoff"): the same offers, by process, in the same grants hash; the
-- offer's owner and acquisition are both the waiter's permit id (32 hex
-- digits, drawn once per acquisition), its identity empty. Grants the
-- offer of the registered process `channel` (popped already) one permit
-- of the count `count_key` if its message reaches a subscriber: the id is
-- added to the held permits `timeouts` with the expiry `now_ms` + the
-- offered lease (Redisson's own shape of an acquired permit: the
-- grantee's lease, timed from its try's send instant, ends no later), the
-- count taken down by one. Returns wake_for_permits()'s grant_one answer.
-- An offer whose id is held already (its own try took it) is dropped.
local function grant_permit_to_offer(registry, grants, count_key, timeouts, channel, publish, now_ms)
  local offer = redis.call('hget', grants, channel)
  if offer == false then return nil end
  redis.call('hdel', grants, channel)
  local lease, acquisition, sent, others, owner, identity = string.match(offer, OFFER_PATTERN)
  if lease == nil or #owner ~= 32 then return nil end
  local id = string.gsub(owner, '%x%x', function(pair) return string.char(tonumber(pair, 16)) end)
  if redis.call('zscore', timeouts, id) ~= false then return nil end
  if redis.call(publish, channel, GRANT_PREFIX .. acquisition .. ':' .. sent) == 0 then return false end
  redis.call('decrby', count_key, 1)
  redis.call('zadd', timeouts, tonumber(now_ms) + tonumber(lease), id)
  -- The offer's identity, stored as an acquisition stores it (its script
  -- includes lib/holder_identity.lua).
  if identity ~= '' then redis.call('set', permit_identity_key(timeouts, id), identity, 'px', lease) end
  -- As an acquisition: the held permits expire with the count if it does.
  local pttl = redis.call('pttl', count_key)
  if pttl > 0 then redis.call('pexpire', timeouts, pttl) end
  if others == '1' then redis.call('zadd', registry, math.max(1, tonumber(now_ms)), channel) end
  return true
end
