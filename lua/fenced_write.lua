-- Fenced write to a resource that lives in Redis: refuse writes carrying a
-- fencing token lower than the highest one seen, so a holder that lost its
-- lock (a long pause, an expired lease) cannot overwrite a newer holder's
-- data.
-- KEYS[1] resource key (a string)
-- KEYS[2] highest token seen "turnstile_fence:{<resource>}"
-- ARGV[1] the writer's fencing token
-- ARGV[2] value to store
-- Reply: 1 if written, 0 if refused as stale.
local token = tonumber(ARGV[1])
if token == nil then
  return redis.error_reply('ERR fencing token is not a number')
end
local highest = tonumber(redis.call('get', KEYS[2]) or '-1')
if token < highest then
  return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
