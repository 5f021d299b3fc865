-- Token lock: SET NX PX in effect (read, then set where none is).
-- KEYS[1] lock key (a string holding the holder's random token, marked
--         once somebody may wait: lib/lock_shape.lua, WAITERS_MARK)
-- ARGV[1] token
-- ARGV[2] lease in ms
-- ARGV[3] '0' once an earlier try of this acquisition found a token lock
--         there: its shape is not read again (a key without an expiry
--         always is)
-- Optional, turnstile's own, in the one order of lib/holder_identity.lua:
-- KEYS[2], ARGV[4] the holder's identity (lib/holder_identity.lua)
-- KEYS[3], ARGV[5..8] (only after KEYS[2]) the wake registry, as in
--         reentrant_lock_acquire.lua (every token lock holder is
--         turnstile's: the reply stays the pttl, and no holder is recorded)
-- A failed try marks the value (needs Redis 6.0: SET KEEPTTL).
-- Reply: nil when acquired (or already ours: ARGV[1] is stored there);
-- otherwise the lock's pttl. A key that is not a token lock, by type or by
-- shape (lib/lock_shape.lua), is refused (WRONGTYPE) rather than waited on
-- forever.
--! include lock_shape
--! include holder_identity
--! include wake_registry
local identity, registry = KEYS[2], KEYS[3]
-- The path when nobody waits: free, no process registered, no other waiter
-- of the caller's to keep registered (the token stored as below).
if ARGV[8] ~= '1' and free_and_unwatched(KEYS[1], registry, nil) then
  note_holder(identity, ARGV[4], ARGV[2], true)
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  return nil
end
--! later
-- What is there is read once (a failed try is the path a herd multiplies:
-- GET, PTTL). GET refuses a key of another type, not a token lock either.
local held = redis.pcall('get', KEYS[1])
-- Free, or ours: the token is drawn once per acquisition, so finding it
-- means this is a retry of a call that took the lock and whose reply was
-- lost. Either way the identity is stored, then the token with its lease
-- (the identity's expiry first: lib/holder_identity.lua); with the
-- registry, the caller's process stays registered while other waiters of
-- it still wait, else it is forgotten.
if held == false or (type(held) == 'string' and token_of(held) == ARGV[1]) then
  -- Free here (not on the path above) means processes are registered:
  -- the value is marked, so that its release wakes one (lib/lock_shape.lua,
  -- WAITERS_MARK). Ours keeps its mark.
  note_holder(identity, ARGV[4], ARGV[2], true)
  redis.call('set', KEYS[1], held or (ARGV[1] .. WAITERS_MARK), 'px', ARGV[2])
  if registry ~= nil then after_success(registry, ARGV[5], ARGV[6], ARGV[8], ARGV[2]) end
  return nil
end
if type(held) ~= 'string' then
  return not_a_lock(KEYS[1], redis.call('type', KEYS[1]).ok)
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 or (ARGV[3] ~= '0' and not is_token_value(held)) then
  return not_a_lock(KEYS[1], 'string')
end
if registry ~= nil and ARGV[7] == '1' then register_waiter(registry, ARGV[5], ARGV[6], pttl) end
-- Somebody may wait now: the holder's release will tell (never a value
-- of another shape: someone else's data is not written to).
if token_of(held) == held and is_token_value(held) then
  redis.call('set', KEYS[1], held .. WAITERS_MARK, 'keepttl')
end
return pttl
