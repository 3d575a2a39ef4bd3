-- charge: add tokens really used to token counters, even past their max.
--
-- KEYS[i]   the counter of tokens rule i
-- ARGV[1]   now, unix milliseconds, from the caller's clock
-- ARGV[2]   tokens
-- ARGV[2i+1], ARGV[2i+2]
--           rule i: max, window in ms
local now = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
for i = 1, #KEYS do
  local lim, win = tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2])
  local s = redis.call('HMGET', KEYS[i], 'l', 't')
  local level = tonumber(s[1]) or 0
  local at = tonumber(s[2]) or now
  if now > at then
    level = math.max(0, level - (now - at) * lim / win)
    at = now
  end
  level = level + tokens
  redis.call('HSET', KEYS[i], 'l', string.format('%.17g', level), 't', string.format('%d', at))
  redis.call('PEXPIRE', KEYS[i], string.format('%d', math.ceil(level * win / lim) + at - now + 1000))
end
return 0
