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
-- The key expires by itself (an offer lives two liveness timeouts and a
-- lease beyond its latest try; a dead waiter's entry is also dropped when
-- the queue evicts it).
local GRANT_PREFIX = 'turnstile:grant:'

local function grants_live(grants, ttl_ms)
  if redis.call('pttl', grants) < ttl_ms then redis.call('pexpire', grants, ttl_ms) end
end

-- A waiting try of `owner` (acquisition id `acquisition`, sent at `sent`)
-- offers to take a grant for `lease` ms, with its holder identity; its
-- next try is due within a third of `liveness` (lib/fair_queue.lua).
local function offer_grant(grants, owner, lease, timeout, acquisition, sent, identity, liveness)
  redis.call('hset', grants, owner,
             'w:' .. lease .. ':' .. timeout .. ':' .. acquisition .. ':' .. sent .. ':' .. (identity or ''))
  grants_live(grants, 2 * liveness + tonumber(lease))
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
-- prefix), alive, the optional grants and identity keys, limit (the most
-- heads one call evicts) and the optional wake (lib/fair_queue.lua,
-- evict_dead_heads: the new front after a grant is promoted). A turnstile
-- waiter (one with a liveness deadline) that its grant or its message
-- reaches nobody is gone (its process died, its link is down, or, within
-- a round trip of its first try, it does not listen yet: it joins again
-- at its next try): it leaves the queue as a dead head does, and the next
-- one is granted or told. So only a process that listens is ever granted.
local function pass_on(k, head, now, publish, message)
  local dropped = 0
  while head ~= false and dropped < k.limit do
    local channel = k.prefix .. ':' .. head
    local offer = false
    if k.grants ~= nil then offer = redis.call('hget', k.grants, head) end
    local lease, timeout, acquisition, sent, identity
    if offer then
      lease, timeout, acquisition, sent, identity = string.match(offer, '^w:(%d+):(%d+):(%x+):(%-?%d+):(.*)$')
    end
    local alive = redis.call('zscore', k.alive, head)
    local received
    if lease ~= nil and alive ~= false and tonumber(alive) > now then
      received = redis.call(publish, channel, GRANT_PREFIX .. acquisition .. ':' .. sent)
      if received > 0 then
        leave_head(k.queue, k.deadlines, k.alive, head, now, tonumber(timeout), k.wake)
        redis.call('hincrby', k.lock, head, 1)
        if identity ~= '' then note_holder(k.identity, identity, lease, true) end
        redis.call('pexpire', k.lock, lease)
        redis.call('hset', k.grants, head, 'g:' .. acquisition)
        grants_live(k.grants, tonumber(lease))
        return
      end
    else
      received = redis.call(publish, channel, message)
    end
    if received > 0 or alive == false then break end
    redis.call('lpop', k.queue)
    redis.call('zrem', k.deadlines, head)
    redis.call('zrem', k.alive, head)
    if k.grants ~= nil then redis.call('hdel', k.grants, head) end
    dropped = dropped + 1
    head = redis.call('lindex', k.queue, 0)
  end
  if dropped > 0 and k.wake ~= nil then promote_near(k.queue, k.alive, now, k.wake) end
end
