-- Shared: the fair lock's direct handoff (docs/safety.md, "Direct
-- handoff"), included after fair_queue and holder_identity. A release that
-- frees the lock grants it to the head of the queue when the head is a
-- live turnstile waiter that asked for grants: the lock hash gets its hold
-- and its lease as its own acquisition would, it leaves the queue as an
-- acquisition does, and the message on its own channel carries the grant,
-- so it proceeds without a round trip. Any other head (a Redisson waiter:
-- no offer) is told "0" on its channel, as Redisson's unlock does.
--   grants  hash "turnstile_lock_grants:{<name>}" (turnstile's own), one
--           field per turnstile waiter that takes grants:
--     owner -> "w:<lease ms>:<waiter timeout ms>:<acquisition>:<sent>:<identity>"
--              its offer, rewritten by each of its tries: <sent> is the
--              send instant of that try on the waiter's own clock
--              (opaque here), echoed in the grant, from which the waiter
--              times its lease (the grant follows the try's processing)
--     owner -> "g:<acquisition>" granted and not yet confirmed: a try of
--              that acquisition arriving after the grant takes it without
--              a second hold (taken_grant), its give-up gives it back
-- The key expires by itself (an offer lives two waiter timeouts and a
-- lease beyond its latest try; a dead waiter's entry is also dropped when
-- the queue evicts it).
local GRANT_PREFIX = 'turnstile:grant:'

local function grants_live(grants, ttl_ms)
  if redis.call('pttl', grants) < ttl_ms then redis.call('pexpire', grants, ttl_ms) end
end

-- A waiting try of `owner` (acquisition id `acquisition`, sent at `sent`)
-- offers to take a grant for `lease` ms, with its holder identity.
local function offer_grant(grants, owner, lease, timeout, acquisition, sent, identity)
  redis.call('hset', grants, owner,
             'w:' .. lease .. ':' .. timeout .. ':' .. acquisition .. ':' .. sent .. ':' .. (identity or ''))
  grants_live(grants, 2 * tonumber(timeout) + tonumber(lease))
end

-- Whether a try of `owner`'s acquisition `acquisition`, `owner` holding
-- the lock, finds the lock granted to it: taken then (the lease re-armed
-- from this try, the marker gone), with no second hold. A marker of
-- another acquisition is stale. (A grant's marker without the hold it
-- granted is stale too: the owner's next waiting try overwrites it.)
local function taken_grant(grants, lock, owner, acquisition, lease, identity_key)
  local marker = redis.call('hget', grants, owner)
  if marker == false or string.sub(marker, 1, 2) ~= 'g:' then return false end
  redis.call('hdel', grants, owner)
  if marker ~= 'g:' .. acquisition then return false end
  rearm_holder(identity_key, lease)
  redis.call('pexpire', lock, lease)
  return true
end

-- The lock at k.lock is free (deleted, or its lease ran out): `head`, the
-- first entry of the queue left by evict_dead_heads (false: none), is
-- granted it or told. `k`: lock, queue, deadlines, prefix (channel
-- prefix), alive, and the optional grants and identity keys. A grant whose
-- message reaches no subscriber is not made (the head is told instead and
-- stays at the head: a live waiter not subscribed yet tries at once, a
-- dead one is evicted by its liveness), so only a process that listens is
-- ever granted.
local function pass_on(k, head, now, publish, message)
  if head == false then return end
  local channel = k.prefix .. ':' .. head
  local offer = false
  if k.grants ~= nil then offer = redis.call('hget', k.grants, head) end
  local lease, timeout, acquisition, sent, identity
  if offer then
    lease, timeout, acquisition, sent, identity = string.match(offer, '^w:(%d+):(%d+):(%x+):(%-?%d+):(.*)$')
  end
  local alive = redis.call('zscore', k.alive, head)
  if lease == nil or alive == false or tonumber(alive) <= now or
      redis.call(publish, channel, GRANT_PREFIX .. acquisition .. ':' .. sent) == 0 then
    redis.call(publish, channel, message)
    return
  end
  leave_head(k.queue, k.deadlines, k.alive, head, now, tonumber(timeout))
  redis.call('hincrby', k.lock, head, 1)
  if identity ~= '' then note_holder(k.identity, identity, lease, true) end
  redis.call('pexpire', k.lock, lease)
  redis.call('hset', k.grants, head, 'g:' .. acquisition)
  grants_live(k.grants, tonumber(lease))
end
