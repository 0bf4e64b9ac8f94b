-- Release a zone lease only if it is still exactly (shard, gen).
-- KEYS[1] lease hash    ARGV[1] shard id    ARGV[2] gen
-- Returns 1 released, 0 refused (not ours, or already gone). The generation
-- counter is left alone so the next claim still mints a higher generation.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'gen') == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
