-- The rebalancer's leader lease: one shard decides placement at a time.
-- KEYS[1] leader key    ARGV[1] shard id    ARGV[2] TTL, ms
-- Returns 1 when the caller leads now (newly, or its own lease renewed),
-- 0 when another shard does. Expires on this server's clock, so a dead
-- leader is replaced within one TTL.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
