-- spend: add a signed amount to every budget's period counter, never below
-- zero, and report the alerts reached for the first time in the period.
--
-- KEYS[i]   budget i's counter for the period
-- ARGV[1]   the amount, a signed integer
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]
--           budget i: when the counter expires, unix milliseconds; the
--           counter values of its two alerts, 0 for none
-- Returns, per budget, the counter after the change and a bit mask of the
-- alerts reached (1: the first, 2: the second).
local amount = ARGV[1]
local out = {}
for i = 1, #KEYS do
  local v = redis.call('HINCRBY', KEYS[i], 's', amount)
  if v < 0 then
    redis.call('HSET', KEYS[i], 's', 0)
    v = 0
  end
  redis.call('PEXPIREAT', KEYS[i], ARGV[3 * i - 1])
  local mask = 0
  for j = 1, 2 do
    local t = tonumber(ARGV[3 * i - 1 + j])
    if t > 0 and v >= t and redis.call('HSETNX', KEYS[i], 'a' .. j, 1) == 1 then
      mask = mask + j
    end
  end
  out[2 * i - 1] = v
  out[2 * i] = mask
end
return out
