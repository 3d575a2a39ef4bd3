-- reserve: admit a request when every budget's period counter is below its
-- max, and then add the reservation to each; if any refuses, change
-- nothing. Counters are hashes: s is what was spent and reserved, a1 and a2
-- mark the alerts given in the period.
--
-- KEYS[i]   budget i's counter for the period
-- ARGV[1]   the amount to reserve, an integer
-- ARGV[2]   '1': if a counter is absent, change nothing and report the
--           absent ones (to be rebuilt from the ledger); '0': absent is 0
-- ARGV[2i+1], ARGV[2i+2]
--           budget i: max; when the counter expires, unix milliseconds
-- Returns {allowed, then each budget's counter}, or, for absent counters
-- with ARGV[2] '1', {-1, then -1 for each absent counter and 0 for the
-- others}.
local amount = ARGV[1]
if ARGV[2] == '1' then
  local out, absent = {-1}, false
  for i = 1, #KEYS do
    out[i + 1] = 0
    if redis.call('EXISTS', KEYS[i]) == 0 then
      out[i + 1] = -1
      absent = true
    end
  end
  if absent then
    return out
  end
end
local spent, ok = {}, 1
for i = 1, #KEYS do
  spent[i] = tonumber(redis.call('HGET', KEYS[i], 's')) or 0
  if spent[i] >= tonumber(ARGV[2 * i + 1]) then
    ok = 0
  end
end
if ok == 1 then
  for i = 1, #KEYS do
    spent[i] = redis.call('HINCRBY', KEYS[i], 's', amount)
    redis.call('PEXPIREAT', KEYS[i], ARGV[2 * i + 2])
  end
end
local out = {ok}
for i = 1, #KEYS do
  out[i + 1] = spent[i]
end
return out
