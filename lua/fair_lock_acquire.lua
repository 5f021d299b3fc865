-- Fair lock: acquire, or join / keep one's place in the FIFO queue shared
-- with Redisson's RFairLock waiters (lib/fair_queue.lua: chained deadlines
-- as Redisson's, plus turnstile's own liveness deadlines).
-- KEYS[1] lock hash
-- KEYS[2] wait queue "redisson_lock_queue:{<name>}" (list of owner ids)
-- KEYS[3] waiter deadlines "redisson_lock_timeout:{<name>}" (zset, epoch ms)
-- KEYS[4] wake-up channel prefix "redisson_lock__channel:{<name>}"; a
--         waiter's own channel is "<prefix>:<owner id>"
-- KEYS[5] turnstile waiters' liveness "turnstile_lock_waiters:{<name>}"
--         (zset, epoch ms)
-- KEYS[6] (fenced only) token counter "redisson_lock_token:{<name>}"
--         (lib/fencing_counter.lua)
-- ARGV[1] lease in ms
-- ARGV[2] owner id
-- ARGV[3] waiter timeout in ms: a waiter that has not retried for this
--         long is taken for dead and evicted when it reaches the head
-- ARGV[4] the caller's wall clock, epoch ms
-- ARGV[5] '1' if the caller waits (joins the queue or keeps its place
--         there), '0' for a single try that never queues
-- ARGV[6] publish command ('PUBLISH' or 'SPUBLISH')
-- ARGV[7] unlock message
-- ARGV[8] the most stale heads one call evicts
-- ARGV[9] the chain wait in ms: the least wait this waiter adds in
--         Redisson's deadline arithmetic, and the longest wait assumed for
--         a Redisson head
-- ARGV[10] '0' once an earlier try of this acquisition found a held lock
--         hash: its shape is not read again (lib/lock_shape.lua)
-- ARGV[11] (optional) the holder's identity, stored at the last KEYS
--         (after KEYS[6] when fenced; lib/holder_identity.lua) but the
--         grants key; a waiting try stores it as its waiter's identity at
--         that key .. ':' .. the owner id
-- ARGV[12] (optional, with ARGV[11], not fenced) direct handoff: the
--         acquisition's id (hex); the grants key "turnstile_lock_grants:
--         {<name>}" is then the last KEYS (lib/fair_handoff.lua). A waiting
--         try offers to take a grant; a try finding its acquisition
--         granted takes it.
-- ARGV[13] (with ARGV[12]) this try's send instant on the caller's clock,
--         echoed in a grant
-- Reply: {1, fencing token (0 if not fenced), 0} when acquired (reentrant
-- acquisitions included); {0, pttl of the lock (-2 when free), liveness}
-- when not: liveness is the liveness timeout in ms the waiting try was
-- given (lib/fair_queue.lua, "Near and far waiters": the waiter timeout at
-- the head, longer behind it; 0 for a single try), a third of which is how
-- long it may go before its next try.
-- A key that is not a held lock hash (lib/lock_shape.lua: any owner, every
-- value a hold count) is refused (WRONGTYPE) rather than waited on.
--! include lock_shape
--! include fair_queue
--! include fencing_counter
--! include holder_identity
--! include fair_handoff
local now = tonumber(ARGV[4])
local timeout = tonumber(ARGV[3])
local wait = tonumber(ARGV[9])
local own_keys = #KEYS
local grants = nil
if ARGV[12] ~= nil then
  grants = KEYS[own_keys]
  own_keys = own_keys - 1
end
local identity_key = nil
local fencing_counter = KEYS[6]
if ARGV[11] ~= nil then
  identity_key = KEYS[own_keys]
  if own_keys < 7 then fencing_counter = nil end
end
-- The path when nobody waits: the lock free, nobody queued (either
-- library's queue and deadlines, turnstile's liveness), no offer or grant
-- left; one command for the five keys.
if redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[5], grants or KEYS[1]) == 0 then
  local token = 0
  if fencing_counter ~= nil then token = next_fencing_token(fencing_counter) end
  if type(token) == 'table' then return token end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity_key, ARGV[11], ARGV[1], true)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token, 0}
end
--! later
-- The lock hash is read once: whether this owner holds it, else its pttl
-- (-2 when free), which nothing below changes.
local kind = redis.call('type', KEYS[1]).ok
local holds = false
local pttl = -2
if kind ~= 'none' then
  if kind == 'hash' then holds = holds_plain(KEYS[1], ARGV[2]) end
  if not holds then pttl = held_hash_pttl(KEYS[1], kind, ARGV[10]) end
  if pttl == false then return not_a_lock(KEYS[1], kind) end
end
if grants ~= nil and holds and taken_grant(grants, KEYS[1], ARGV[2], ARGV[12], ARGV[1], identity_key) then
  return {1, 0, 0}
end
local wake = {prefix = KEYS[4], publish = ARGV[6], timeout = timeout, self = ARGV[2], grants = grants}
local evicted, head = evict_dead_heads(KEYS[2], KEYS[3], KEYS[5], now, tonumber(ARGV[8]), grants, wake)
local free = kind == 'none'
if holds or (free and (head == false or head == ARGV[2])) then
  -- The token first: a floor it needs reads TIME, which an ACL may refuse,
  -- and a refusal then leaves nothing written (no lock held by nobody).
  local token = 0
  if fencing_counter ~= nil then token = next_fencing_token(fencing_counter) end
  if type(token) == 'table' then return token end
  if head == ARGV[2] then leave_head(KEYS[2], KEYS[3], KEYS[5], ARGV[2], now, timeout, wake) end
  redis.call('zrem', KEYS[5], ARGV[2])
  if grants ~= nil then redis.call('hdel', grants, ARGV[2]) end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity_key, ARGV[11], ARGV[1], count == 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token, 0}
end
if free and evicted > 0 then
  -- Whoever freed the lock woke (or meant to grant) a waiter that turned
  -- out dead: wake the first live one (no grant: the caller, evicted
  -- itself, joins again behind it in this call).
  redis.call(ARGV[6], KEYS[4] .. ':' .. head, ARGV[7])
end
local liveness = 0
if ARGV[5] == '1' then
  local margin = 2 * timeout
  -- Queued or not: the deadline zset and the list hold the same owners
  -- (every script of either library adds and removes both).
  local current = tonumber(redis.call('zscore', KEYS[3], ARGV[2]) or '')
  local only
  if current == nil then
    -- Join at the tail, chained after the last entry (as Redisson's
    -- waiters: the lock's expected release when nobody is queued). Its
    -- own liveness (if any is left) must not count it as queued.
    redis.call('zrem', KEYS[5], ARGV[2])
    only = turnstile_only(KEYS[2], KEYS[5], now)
    local deadline = own_deadline(now, pttl, wait, margin)
    if not only then
      deadline = needed_deadline(KEYS[2], KEYS[3], KEYS[5], redis.call('llen', KEYS[2]), now + math.max(pttl, 0),
                                 wait, margin)
    end
    redis.call('zadd', KEYS[3], deadline, ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
  else
    only = turnstile_only(KEYS[2], KEYS[5], now)
    if only then
      keep_own_deadline(KEYS[3], ARGV[2], current, now, pttl, wait, margin, timeout)
    else
      local position = redis.call('lpos', KEYS[2], ARGV[2])
      if position == false then
        -- In the zset alone (never left so by either library): listed again.
        redis.call('rpush', KEYS[2], ARGV[2])
      else
        -- Keep the place: lift the chained deadline, with every one behind
        -- it (so the chain stays intact), once it falls a waiter timeout
        -- short of what the shifts ahead could take away.
        local needed = needed_deadline(KEYS[2], KEYS[3], KEYS[5], position, now, wait, margin)
        if current < needed - timeout then
          shift_from(KEYS[2], KEYS[3], position, needed - current)
        end
      end
    end
  end
  -- Near (among the first NEAR_PLACES, or the chain kept): a waiter
  -- timeout; else far.
  liveness = timeout
  if only and head ~= false and head ~= ARGV[2] and redis.call('lindex', KEYS[2], 1) ~= ARGV[2] then
    liveness = far_timeout(timeout, wait)
  end
  mark_alive(KEYS[5], KEYS[3], ARGV[2], now, liveness)
  -- A waiter's identity (key_layout.h, "The holder's identity"):
  -- "turnstile_holder:{<name>}:<owner id>", for as long as its liveness
  -- (each waiting try stores it again; `status` reads it for the queued).
  if identity_key ~= nil then redis.call('set', identity_key .. ':' .. ARGV[2], ARGV[11], 'px', liveness) end
  if grants ~= nil then offer_grant(grants, ARGV[2], ARGV[1], ARGV[3], ARGV[12], ARGV[13], ARGV[11], liveness) end
end
return {0, pttl, liveness}
