-- charge: adjust token counters by a signed number of tokens. A positive
-- adjustment adds usage, even past max; a negative one refunds an unused
-- reservation, never below empty.
--
-- KEYS[i]   the counter of tokens rule i
-- ARGV[1]   now, unix milliseconds, from the caller's clock
-- ARGV[2]   tokens, signed
-- ARGV[2i+1], ARGV[2i+2]
--           rule i: max, window in ms
local now = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
for i = 1, #KEYS do
  local lim, win = tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2])
  local s = redis.call('HMGET', KEYS[i], 'l', 't')
  -- Refunding an absent (empty) counter has nothing to do. An emptied one
  -- is kept (until a second past its time) for that time: a caller clock
  -- behind it must still drain nothing.
  if s[1] or tokens > 0 then
    local level = tonumber(s[1]) or 0
    local at = tonumber(s[2]) or now
    if now > at then
      level = math.max(0, level - (now - at) * lim / win)
      at = now
    end
    level = math.max(0, level + tokens)
    redis.call('HSET', KEYS[i], 'l', string.format('%.17g', level), 't', string.format('%d', at))
    redis.call('PEXPIRE', KEYS[i], string.format('%d', math.ceil(level * win / lim) + at - now + 1000))
  end
end
return 0
