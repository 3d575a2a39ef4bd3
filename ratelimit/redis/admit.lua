-- admit: decide on every rule, then consume only if all allow. The
-- arithmetic is package ratelimit's GCRA (ratelimit/memory does the same in
-- Go); the conformance suite keeps the two equal.
--
-- KEYS[i]   the counter of rule i
-- ARGV[1]   now, unix milliseconds, from the caller's clock
-- ARGV[2]   lease id (used by concurrency rules)
-- ARGV[3]   tokens to reserve (>= 0); a tokens rule needs min(reserve, max)
--           of them free, at least 1, and consumes reserve on admission
-- ARGV[3i+1], ARGV[3i+2], ARGV[3i+3]
--           rule i: kind ("r" requests, "t" tokens, "c" concurrent), max,
--           window in ms (for "c": the lease lifetime)
-- Returns {all allowed, then per rule: allowed, remaining, reset ms, retry ms}.
local eps = 1e-6
local now = tonumber(ARGV[1])
local lease = ARGV[2]
local reserve = tonumber(ARGV[3])
local n = #KEYS
local kind, lim, win, at, used, need, ok = {}, {}, {}, {}, {}, {}, {}
local all = true

-- drain is how many ms units take to drain, rounded up.
local function drain(units, i)
  if units <= 0 then return 0 end
  return math.ceil(units * win[i] / lim[i])
end

for i = 1, n do
  kind[i] = ARGV[3 * i + 1]
  lim[i] = tonumber(ARGV[3 * i + 2])
  win[i] = tonumber(ARGV[3 * i + 3])
  need[i] = 1
  if kind[i] == 't' then need[i] = math.max(1, math.min(reserve, lim[i])) end
  if kind[i] == 'c' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    used[i] = redis.call('ZCARD', KEYS[i])
  else
    local s = redis.call('HMGET', KEYS[i], 'l', 't')
    local level = tonumber(s[1]) or 0
    at[i] = tonumber(s[2]) or now
    -- A caller clock behind the stored time drains nothing: skew never
    -- refills a bucket.
    if now > at[i] then
      level = math.max(0, level - (now - at[i]) * lim[i] / win[i])
      at[i] = now
    end
    used[i] = level
  end
  ok[i] = used[i] + need[i] <= lim[i] + eps
  all = all and ok[i]
end

if all then
  for i = 1, n do
    if kind[i] == 'c' then
      redis.call('ZADD', KEYS[i], string.format('%d', now + win[i]), lease)
      redis.call('PEXPIRE', KEYS[i], string.format('%d', win[i]))
      used[i] = used[i] + 1
    else
      -- a request, or the reservation of a tokens rule (none when 0)
      local add = reserve
      if kind[i] == 'r' then add = 1 end
      if add > 0 then
        used[i] = used[i] + add
        redis.call('HSET', KEYS[i], 'l', string.format('%.17g', used[i]), 't', string.format('%d', at[i]))
        redis.call('PEXPIRE', KEYS[i], string.format('%d', drain(used[i], i) + at[i] - now + 1000))
      end
    end
  end
end

local out = {all and 1 or 0}
for i = 1, n do
  local remaining, reset, retry
  if kind[i] == 'c' then
    remaining, reset, retry = math.max(0, lim[i] - used[i]), 0, 0
  else
    remaining = math.max(0, math.floor(lim[i] - used[i] + eps))
    reset = drain(used[i], i)
    retry = 0
    if not ok[i] then retry = drain(used[i] + need[i] - lim[i], i) end
  end
  out[#out + 1] = ok[i] and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
