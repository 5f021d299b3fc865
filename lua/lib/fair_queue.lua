-- Shared: the fair lock's wait queue, which turnstile and Redisson waiters
-- share (included by the fair_lock_* scripts; the design is in
-- include/turnstile/fair_lock.h).
--   queue      list of owner ids in arrival order (Redisson's)
--   deadlines  zset owner id -> chained deadline, epoch ms (Redisson's):
--              an entry's deadline is its predecessor's plus its wait, and
--              whoever leaves the queue moves the deadlines behind it down
--              by its wait. Redisson evicts a head whose deadline passed.
--   alive      zset owner id -> liveness deadline, epoch ms (turnstile's
--              own waiters only: their wall clock at their latest retry
--              plus the waiter timeout)
-- Neither shared key ever gets an expiry: Redisson's waiters never extend
-- one, so any expiry could drop them.
--
-- Near and far waiters. A dead entry is evicted when it reaches the head,
-- which the live waiter right behind it, keeping alive, sees first; so
-- only the first NEAR_PLACES entries' liveness decides anything. In a
-- queue of turnstile waiters alone, a waiter behind them keeps alive every
-- third of a longer liveness timeout (far_timeout: FAR_FACTOR waiter
-- timeouts, within its chained deadline); the first NEAR_PLACES, and every
-- waiter of a queue where the chain is kept, every third of the waiter
-- timeout. A far waiter that moves into the first NEAR_PLACES is told at
-- once (NEAR_MESSAGE on its channel: it keeps alive at the near pace from
-- then, without a try of its own), its liveness is brought down to a
-- waiter timeout from now and its grant offer, if older than a waiter
-- timeout, dropped (promote_near): a frozen one (SIGSTOP, its connection
-- open) is granted nothing until its next try, and is evicted a waiter
-- timeout later. A call's reply tells
-- the waiter which timeout it got.
--
-- Cost per call. While only turnstile waiters are queued (turnstile_only),
-- every call is O(log N) for N queued: a waiter's chained deadline is its
-- own, kept by its own retries (own_deadline), and nobody moves the others.
-- Once a Redisson entry is queued, the calls keep the chain as Redisson's
-- arithmetic needs it (needed_deadline, shift_from): O(N) per call, as
-- Redisson's own acquisition is.

-- How many waiter timeouts a far waiter's liveness timeout is.
local FAR_FACTOR = 8
-- How many entries at the front of the queue keep alive as near waiters:
-- the head, and the one that evicts it if it dies.
local NEAR_PLACES = 2
-- What tells a far waiter it moved up (src/locks/engine/wakeup_hub.h,
-- kNearMessage): a message no Redisson waiter is ever sent.
local NEAR_MESSAGE = 'turnstile:near'

-- The liveness timeout of a far waiter: FAR_FACTOR waiter timeouts, but no
-- more than its chained deadline is ahead of now (at least the chain wait
-- plus a waiter timeout: keep_own_deadline), so that a live waiter's
-- liveness deadline never lies beyond its chained one (turnstile_only).
local function far_timeout(timeout, wait)
  return math.min(FAR_FACTOR * timeout, wait + timeout)
end

-- Whether a far waiter's grant offer (lib/fair_handoff.lua) is older than
-- its own waiter timeout: its last try was no later than its liveness
-- deadline `live` less FAR_FACTOR of its waiter timeouts (the offer names
-- it; its far timeout is that or less), so an offer judged fresh is as
-- fresh as a near waiter's may be.
local function stale_offer(offer, live, now)
  local timeout = tonumber(string.match(offer, '^w:%d+:(%d+):') or '')
  return timeout == nil or live - FAR_FACTOR * timeout < now - timeout
end

-- After a call changed the front of the queue: every far turnstile waiter
-- among the first NEAR_PLACES entries (liveness beyond a waiter timeout
-- from now) is told, brought down to a waiter timeout from now, and its
-- grant offer (if any) dropped until its next try when older than its
-- waiter timeout (a frozen one is granted nothing). `wake`: prefix,
-- publish, timeout, the optional grants, and self (the caller, never
-- told).
local function promote_near(queue, alive, now, wake)
  for _, member in ipairs(redis.call('lrange', queue, 0, NEAR_PLACES - 1)) do
    local live = tonumber(redis.call('zscore', alive, member) or '')
    if member ~= wake.self and live ~= nil and live > now + wake.timeout then
      redis.call(wake.publish, wake.prefix .. ':' .. member, NEAR_MESSAGE)
      redis.call('zadd', alive, now + wake.timeout, member)
      if wake.grants ~= nil then
        local offer = redis.call('hget', wake.grants, member)
        if offer ~= false and stale_offer(offer, live, now) then redis.call('hdel', wake.grants, member) end
      end
    end
  end
end

-- Drops dead entries from the head, at most `limit`: a turnstile waiter
-- whose liveness deadline passed, any other entry (Redisson's) whose
-- chained deadline passed or that has none. A live turnstile waiter whose
-- chained deadline fell behind stays; it lifts it at its next retry. With
-- `wake` (optional), a call that evicted some promotes the new front
-- (promote_near). An evicted waiter's grant offer
-- (`grants`, optional: lib/fair_handoff.lua) goes with it. Returns how
-- many it dropped and the head left (false: the queue is empty), which the
-- callers need next.
local function evict_dead_heads(queue, deadlines, alive, now, limit, grants, wake)
  local evicted = 0
  local head = redis.call('lindex', queue, 0)
  while head ~= false and evicted < limit do
    local deadline = redis.call('zscore', alive, head)
    if deadline == false then deadline = redis.call('zscore', deadlines, head) end
    if deadline ~= false and tonumber(deadline) > now then break end
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, head)
    redis.call('zrem', alive, head)
    if grants ~= nil then redis.call('hdel', grants, head) end
    evicted = evicted + 1
    head = redis.call('lindex', queue, 0)
  end
  if wake ~= nil and evicted > 0 then promote_near(queue, alive, now, wake) end
  return evicted, head
end

-- The most member/score pairs one ZADD is given: unpack() puts every
-- argument on the Lua C stack, which holds 8000 (LUAI_MAXCSTACK in 5.1).
local ZADD_BATCH = 500

-- Every member of zset `key` with its score (a number), in one ZRANGE.
local function read_scores(key)
  local flat = redis.call('zrange', key, 0, -1, 'withscores')
  local scores = {}
  for i = 1, #flat, 2 do
    scores[flat[i]] = tonumber(flat[i + 1])
  end
  return scores
end

-- The members of zset `key` as a set (member -> true), in one ZRANGE.
local function read_members(key)
  local members = {}
  for _, member in ipairs(redis.call('zrange', key, 0, -1)) do
    members[member] = true
  end
  return members
end

-- Sets the score of each of `members` (each listed once) in zset `key` to
-- scores[member], for members the zset still holds only (ZADD XX), at
-- most ZADD_BATCH pairs per ZADD. Scores go as '%.17g' text, which names
-- every double exactly (Lua 5.1's own number format, '%.14g', does not).
local function write_scores(key, members, scores)
  for first = 1, #members, ZADD_BATCH do
    local args = {}
    for i = first, math.min(first + ZADD_BATCH - 1, #members) do
      args[#args + 1] = string.format('%.17g', scores[members[i]])
      args[#args + 1] = members[i]
    end
    redis.call('zadd', key, 'xx', unpack(args))
  end
end

-- Adds `delta` ms to the deadline of every entry from list index `from`
-- (0-based) to the tail (entries without a deadline are left without; an
-- owner listed twice moves twice), with a constant number of commands.
-- A shift down given `alive` (and `now`, `margin`) stops short of
-- bringing any turnstile waiter among them within `margin` ms of now: a
-- live waiter's chained deadline stays beyond its liveness deadline
-- (turnstile_only), however its own keep-alives left the chain.
local function shift_from(queue, deadlines, from, delta, alive, now, margin)
  if delta == 0 then return end
  local scores = read_scores(deadlines)
  local members = redis.call('lrange', queue, from, -1)
  if delta < 0 and alive ~= nil then
    local live = read_members(alive)
    for _, member in ipairs(members) do
      if live[member] and scores[member] ~= nil then
        delta = -math.min(-delta, math.max(scores[member] - now - margin, 0))
      end
    end
    if delta == 0 then return end
  end
  local shifted = {}
  local seen = {}
  for _, member in ipairs(members) do
    if scores[member] ~= nil then
      scores[member] = scores[member] + delta
      if not seen[member] then
        seen[member] = true
        shifted[#shifted + 1] = member
      end
    end
  end
  write_scores(deadlines, shifted, scores)
end

-- How far a turnstile waiter leaving the queue from list index `index`
-- (to take the lock, or giving up) moves the deadlines behind it: down by
-- its wait, as a Redisson waiter does (its own distance to its predecessor,
-- or to now at the head: what it added to the chain, lifts included, so
-- deadlines never drift), but never so far that the entry right behind it
-- ends up within `margin` ms of now. (The entry has already been removed:
-- `index` is now the next entry's.)
local function leave_shift(queue, deadlines, index, wait, now, margin)
  wait = math.max(wait, 0)
  local next_member = redis.call('lindex', queue, index)
  if next_member == false then return 0 end
  local score = redis.call('zscore', deadlines, next_member)
  if score == false then return 0 end
  return -math.min(wait, math.max(tonumber(score) - now - margin, 0))
end

-- The chained deadline a turnstile waiter behind the first `ahead` entries
-- needs, so that no sequence of shifts those entries can still make
-- (each leaves once, moving it down by at most its own wait) brings it
-- within `margin` ms of now: its predecessor's deadline (at least
-- `floor`) plus the largest wait ahead plus the margin. A Redisson
-- entry's wait is its distance to its predecessor (the chain keeps it);
-- the head's cannot be seen and is taken to be at most `wait` (the
-- longest Redisson wait configured for the lock).
local function needed_deadline(queue, deadlines, alive, ahead, floor, wait, margin)
  local largest = wait
  local previous = nil
  if ahead > 0 then
    local scores = read_scores(deadlines)
    local live = read_members(alive)
    for _, member in ipairs(redis.call('lrange', queue, 0, ahead - 1)) do
      local score = scores[member]
      if score ~= nil then
        if previous ~= nil and live[member] == nil then
          largest = math.max(largest, score - previous)
        end
        previous = score
      end
    end
  end
  return math.max(floor, previous or floor) + largest + margin
end

-- Renews a turnstile waiter's liveness deadline. The key is turnstile's
-- alone, so it may expire, but not before the latest chained deadline: an
-- entry without a liveness deadline is judged by its chained one, and a
-- crashed waiter's must stay judged by its liveness until then.
local function mark_alive(alive, deadlines, owner, now, timeout)
  redis.call('zadd', alive, now + timeout, owner)
  local latest = redis.call('zrange', alive, -1, -1, 'withscores')
  local lifetime = tonumber(latest[2]) - now
  local chained = redis.call('zrange', deadlines, -1, -1, 'withscores')
  if chained[2] ~= nil then lifetime = math.max(lifetime, tonumber(chained[2]) - now) end
  redis.call('pexpire', alive, math.max(lifetime, 1))
end

-- Whether every entry of the queue is a live turnstile waiter, in
-- O(log N): the queue is no longer than the count of liveness deadlines
-- still ahead. Every such live waiter is queued (only turnstile's calls
-- remove one, with its liveness; Redisson's evict a head whose chained
-- deadline passed, and a live turnstile waiter's chained deadline lies
-- beyond its liveness deadline: own_deadline, and the lifts of the
-- chain), and the queue lists each owner once, so the two sets are equal.
-- A waiter whose liveness lapsed counts as foreign: the chain is kept.
local function turnstile_only(queue, alive, now)
  -- now is whole ms: '%d' spares Lua's float formatting ('(' .. now).
  return redis.call('llen', queue) <= redis.call('zcount', alive, string.format('(%d', now), '+inf')
end

-- The chained deadline of a turnstile waiter in a queue of turnstile
-- waiters only: the one it would be given at the head of an empty queue
-- (the lock's expected release plus its chain wait). Nobody reads the
-- chain ahead of it: Redisson's scripts read a head's deadline (to evict
-- it) and the tail's (to chain a joiner on it), and a turnstile waiter is
-- evicted by its liveness.
local function own_deadline(now, pttl, wait, margin)
  return now + math.max(pttl, 0) + wait + margin
end

-- Keeps a queued turnstile waiter's own chained deadline (a queue of
-- turnstile waiters only) within a waiter timeout of own_deadline():
-- lifted before shifts could bring it near now, brought down when a chain
-- kept while Redisson waiters were queued left it far ahead. One ZADD at
-- most, of its own entry.
local function keep_own_deadline(deadlines, owner, current, now, pttl, wait, margin, timeout)
  local target = own_deadline(now, pttl, wait, margin)
  if current < own_deadline(now, 0, wait, margin) - timeout or current > target + timeout then
    redis.call('zadd', deadlines, target, owner)
  end
end

-- The head `owner` leaves the queue to take the lock (its own acquisition,
-- or a grant: lib/fair_handoff.lua): as Redisson's, the deadlines behind
-- come down by its wait (turnstile waiters alone keep their own: nobody is
-- moved); `margin` is the waiter timeout. With `wake` (as evict_dead_heads
-- takes it), the new front is promoted (promote_near).
local function leave_head(queue, deadlines, alive, owner, now, margin, wake)
  local mine = tonumber(redis.call('zscore', deadlines, owner) or '') or now
  local chained = not turnstile_only(queue, alive, now)
  redis.call('lpop', queue)
  redis.call('zrem', deadlines, owner)
  if chained then
    shift_from(queue, deadlines, 0, leave_shift(queue, deadlines, 0, mine - now, now, margin), alive, now, margin)
  end
  redis.call('zrem', alive, owner)
  if wake ~= nil then promote_near(queue, alive, now, wake) end
end
