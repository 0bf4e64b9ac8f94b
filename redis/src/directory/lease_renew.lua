-- Renew a zone lease only if it is still live and exactly (shard, gen).
-- KEYS[1] lease hash    ARGV[1] shard id    ARGV[2] gen    ARGV[3] TTL, ms
-- Returns 1 renewed, 0 refused. An expired lease is never revived: a renewal
-- that arrives late must lose, because another shard may already have claimed.
-- Generations compare as decimal strings, exactly as they were written.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'gen') == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
