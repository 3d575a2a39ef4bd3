-- spend: add a signed amount to every budget's period counter, never below
-- zero, and report the alerts reached for the first time in the period.
--
-- KEYS[i]   budget i's counter for the period
-- ARGV[1]   the amount, a signed integer
-- ARGV[2]   '1': leave absent counters absent (to be rebuilt from the
--           ledger); '0': an absent counter starts at 0
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]
--           budget i: when the counter expires, unix milliseconds; the
--           counter values of its two alerts, 0 for none
-- Returns, per budget, the counter after the change (-1 for one left
-- absent) and a bit mask of the alerts reached (1: the first, 2: the
-- second).
local amount = ARGV[1]
local out = {}
for i = 1, #KEYS do
  if ARGV[2] == '1' and redis.call('EXISTS', KEYS[i]) == 0 then
    out[2 * i - 1] = -1
    out[2 * i] = 0
  else
    local v = redis.call('HINCRBY', KEYS[i], 's', amount)
    if v < 0 then
      redis.call('HSET', KEYS[i], 's', 0)
      v = 0
    end
    redis.call('PEXPIREAT', KEYS[i], ARGV[3 * i])
    local mask = 0
    for j = 1, 2 do
      local t = tonumber(ARGV[3 * i + j])
      if t > 0 and v >= t and redis.call('HSETNX', KEYS[i], 'a' .. j, 1) == 1 then
        mask = mask + j
      end
    end
    out[2 * i - 1] = v
    out[2 * i] = mask
  end
end
return out
