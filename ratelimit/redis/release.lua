-- release: free a lease's concurrency slots. Removing an absent or expired
-- lease is a no-op.
--
-- KEYS[i]   the counter of concurrency rule i
-- ARGV[1]   lease id
for i = 1, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
return 0
