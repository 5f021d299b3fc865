-- Proclaims an election's leader (include/turnstile/election.h): the value
-- it stands for, written only by the holder of the election's lock, then
-- told to the observers. Its first call after a campaign announces the new
-- leader; later ones change the value.
-- KEYS[1] the election's lock (a fair lock's hash: owner id -> hold count)
-- KEYS[2] the leader record "turnstile_leader:{<name>}", a hash of owner,
--         term, value and since_ms
-- ARGV[1] the leader's owner id
-- ARGV[2] its term: the fencing token of its hold
-- ARGV[3] the value
-- ARGV[4] now, epoch ms (the leader's wall clock): since_ms of a new leader
-- ARGV[5] the channel observers listen on
-- ARGV[6] the publish command (PUBLISH, or SPUBLISH on a sharded Cluster)
-- Reply: 1 proclaimed (and published: the term); 0 the caller does not
-- hold the lock (its hold was lost), or a later term was already
-- proclaimed: nothing changed.
local term = tonumber(ARGV[2])
if term == nil then
  return redis.error_reply('ERR election term is not a number')
end
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local kind = redis.call('type', KEYS[2]).ok
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the leader record ' .. KEYS[2] .. ' is a ' .. kind .. ', not an election\'s')
end
local record = redis.call('hmget', KEYS[2], 'owner', 'term', 'since_ms')
local known = tonumber(record[2])
if known ~= nil and known > term then
  return 0
end
local since = ARGV[4]
if record[1] == ARGV[1] and known == term and record[3] then
  since = record[3]
end
redis.call('hset', KEYS[2], 'owner', ARGV[1], 'term', ARGV[2], 'value', ARGV[3], 'since_ms', since)
redis.call(ARGV[6], ARGV[5], ARGV[2])
return 1
