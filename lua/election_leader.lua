-- Who leads an election (include/turnstile/election.h): the last leader
-- proclaimed, while it still holds the election's lock.
-- KEYS[1] the election's lock (a fair lock's hash: owner id -> hold count)
-- KEYS[2] the leader record "turnstile_leader:{<name>}"
-- Reply: {} when nobody leads (no record, or its owner no longer holds the
-- lock: lost, resigned, or its successor not proclaimed yet); else
-- {owner, term, value, since_ms, pttl_ms of the lock}.
if redis.call('type', KEYS[2]).ok ~= 'hash' or redis.call('type', KEYS[1]).ok ~= 'hash' then
  return {}
end
local record = redis.call('hmget', KEYS[2], 'owner', 'term', 'value', 'since_ms')
if not record[1] or not record[2] or redis.call('hexists', KEYS[1], record[1]) == 0 then
  return {}
end
return {record[1], record[2], record[3] or '', record[4] or '0', redis.call('pttl', KEYS[1])}
