-- reserve: admit a request when every budget's period counter is below its
-- max, and then add the reservation to each; if any refuses, change
-- nothing. Counters are hashes: s is what was spent and reserved, a1 and a2
-- mark the alerts given in the period.
--
-- KEYS[i]   budget i's counter for the period
-- ARGV[1]   the amount to reserve, an integer
-- ARGV[2i], ARGV[2i+1]
--           budget i: max; when the counter expires, unix milliseconds
local amount = ARGV[1]
local spent, ok = {}, 1
for i = 1, #KEYS do
  spent[i] = tonumber(redis.call('HGET', KEYS[i], 's')) or 0
  if spent[i] >= tonumber(ARGV[2 * i]) then
    ok = 0
  end
end
if ok == 1 then
  for i = 1, #KEYS do
    spent[i] = redis.call('HINCRBY', KEYS[i], 's', amount)
    redis.call('PEXPIREAT', KEYS[i], ARGV[2 * i + 1])
  end
end
local out = {ok}
for i = 1, #KEYS do
  out[i + 1] = spent[i]
end
return out
