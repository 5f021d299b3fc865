-- Token lock watchdog: compare-and-extend many locks in one call.
-- KEYS[i] lock key i
-- ARGV[1] lease in ms
-- ARGV[i + 1] token of lock i
-- Reply: array, element i is 1 if lock i still holds its token (lease
-- re-armed), else 0.
local renewed = {}
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[i + 1] then
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
