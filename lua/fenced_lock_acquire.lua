-- Fenced reentrant lock: acquire and draw a fencing token (Redisson
-- RFencedLock layout).
-- KEYS[1] lock hash
-- KEYS[2] token counter "redisson_lock_token:{<name>}" (no TTL, never reset;
--         lib/fencing_counter.lua floors it when it is missing)
-- ARGV[1] lease in ms
-- ARGV[2] owner id (the hash field)
-- ARGV[3] '0' once an earlier try of this acquisition found a held lock
--         hash (lib/lock_shape.lua, held_hash_pttl)
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[3], ARGV[4] the holder's identity (lib/holder_identity.lua)
-- KEYS[4], ARGV[5..8] (only after KEYS[3]) the wake registry, as in
--         reentrant_lock_acquire.lua (lib/wake_registry.lua)
-- Reply: {1, token} when acquired (reentrant acquisitions draw a token too);
-- {0, pttl} when another owner holds it, with KEYS[4] {0, pttl, 1 if the
-- holder is not a turnstile holder that wakes the registry, else 0}. A key that is not a
-- held lock hash (lib/lock_shape.lua: any owner, every value a hold count)
-- is refused (WRONGTYPE) rather than waited on.
--! include lock_shape
--! include fencing_counter
--! include holder_identity
--! include wake_registry
local identity, registry = KEYS[3], KEYS[4]
-- The path when nobody waits (reentrant_lock_acquire.lua). The token
-- first: a floor it needs reads TIME, which an ACL may refuse, and a
-- refusal then leaves nothing written (no lock held by nobody).
if ARGV[8] ~= '1' and free_and_unwatched(KEYS[1], registry, nil) then
  local token = next_fencing_token(KEYS[2])
  if type(token) == 'table' then return token end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity, ARGV[4], ARGV[1], true, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token}
end
--! later
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' or (kind == 'hash' and holds_plain(KEYS[1], ARGV[2])) then
  local token = next_fencing_token(KEYS[2])
  if type(token) == 'table' then return token end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  note_holder(identity, ARGV[4], ARGV[1], count == 1, registry ~= nil)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if registry ~= nil then after_success(registry, ARGV[5], ARGV[6], ARGV[8], ARGV[1]) end
  return {1, token}
end
local pttl = held_hash_pttl(KEYS[1], kind, ARGV[3])
if pttl == false then
  return not_a_lock(KEYS[1], kind)
end
if registry == nil then
  return {0, pttl}
end
if ARGV[7] == '1' then register_waiter(registry, ARGV[5], ARGV[6], pttl) end
return {0, pttl, holder_recorded(identity, KEYS[1]) and 0 or 1}
