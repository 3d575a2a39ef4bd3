-- seed: set every absent budget counter to what the ledger says its
-- subject spent in the period; a counter that exists (another replica
-- seeded it first, or requests counted on it) is left alone.
--
-- KEYS[i]   budget i's counter for the period
-- ARGV[3i-2], ARGV[3i-1], ARGV[3i]
--           budget i: the amount, an integer; when the counter expires,
--           unix milliseconds; the bit mask of the alerts the amount
--           already reached (1: the first, 2: the second)
-- Returns the number of counters set.
local n = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('HSET', KEYS[i], 's', ARGV[3 * i - 2])
    local mask = tonumber(ARGV[3 * i])
    for j = 1, 2 do
      if math.floor(mask / j) % 2 == 1 then
        redis.call('HSET', KEYS[i], 'a' .. j, 1)
      end
    end
    redis.call('PEXPIREAT', KEYS[i], ARGV[3 * i - 1])
    n = n + 1
  end
end
return n
