-- spent: read every budget's period counter.
--
-- KEYS[i]   budget i's counter for the period
local out = {}
for i = 1, #KEYS do
  out[i] = tonumber(redis.call('HGET', KEYS[i], 's')) or 0
end
return out
