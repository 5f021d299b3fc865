-- Reentrant lock: acquire (Redisson RLock layout).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms
-- ARGV[2] owner id "<client uuid>:<task id>" (the hash field)
-- ARGV[3] '0' once an earlier try of this acquisition found a held lock
--         hash: the shape is not read again (lib/lock_shape.lua,
--         held_hash_pttl); anything else (or nothing) reads it
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[2] the holder's identity, ARGV[4] its value (lib/holder_identity.lua)
-- KEYS[3] (only after KEYS[2]) the wake registry
--         "turnstile_lock_wake:{<name>}" (lib/wake_registry.lua)
-- ARGV[5] with KEYS[3]: the caller's process wake channel
-- ARGV[6] with KEYS[3]: the caller's wall clock in ms
-- ARGV[7] with KEYS[3]: '1' if the caller waits after a failure (its
--         process is registered)
-- ARGV[8] with KEYS[3]: '1' if other waiters of the caller's process
--         still wait after a success (its process stays registered; else
--         it is forgotten)
-- KEYS[4] (only after KEYS[3]) the grants "turnstile_lock_grants:{<name>}":
--         direct handoff to registered processes (lib/wake_registry.lua)
-- ARGV[9] with KEYS[4]: the caller's acquisition id (hex)
-- ARGV[10] with KEYS[4]: this try's send instant on the caller's clock
--         (an integer, opaque here): a waiting try (ARGV[7] '1') leaves
--         its process's offer; a try of an acquisition the lock was
--         granted to takes it without a second hold
-- Reply: nil when acquired (the owner's count is incremented and the lease
-- re-armed); otherwise the lock's remaining ttl in ms, which tells a waiter
-- how long it may sleep before it must try again; with KEYS[3] {ttl, 1 if
-- the holder is not a turnstile holder whose release wakes the registry
-- (lib/wake_registry.lua, holder_recorded: it may publish on the shared
-- channel only), else 0}. A key that is not a held lock hash
-- (lib/lock_shape.lua: any owner, every value a hold count; a read-write
-- lock's too) is refused (WRONGTYPE) rather than waited on.
--! include lock_shape
--! include holder_identity
--! include wake_registry
local identity, registry, grants = KEYS[2], KEYS[3], KEYS[4]
-- The path when nobody waits: a free lock, no process registered, no offer
-- or grant to settle, no other waiter of the caller's to keep registered.
if ARGV[8] ~= '1' and free_and_unwatched(KEYS[1], registry, grants) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity, ARGV[4], ARGV[1], true, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
--! later
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' or (kind == 'hash' and holds_plain(KEYS[1], ARGV[2])) then
  if grants ~= nil then
    withdraw_offer(grants, ARGV[5], ARGV[2])
    if taken_grant(grants, KEYS[1], ARGV[2], ARGV[9], ARGV[1], identity) then
      after_success(registry, ARGV[5], ARGV[6], ARGV[8], ARGV[1])
      return nil
    end
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity, ARGV[4], ARGV[1], count == 1, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if registry ~= nil then after_success(registry, ARGV[5], ARGV[6], ARGV[8], ARGV[1]) end
  return nil
end
local pttl = held_hash_pttl(KEYS[1], kind, ARGV[3])
if pttl == false then
  return not_a_lock(KEYS[1], kind)
end
if registry == nil then
  return pttl
end
if ARGV[7] == '1' then
  register_waiter(registry, ARGV[5], ARGV[6], pttl)
  if grants ~= nil then offer_grant(grants, ARGV[5], ARGV[2], ARGV[1], ARGV[9], ARGV[10], ARGV[8], ARGV[4], pttl) end
end
return {pttl, holder_recorded(identity, KEYS[1]) and 0 or 1}
