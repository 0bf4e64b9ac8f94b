-- Release a zone lease only if it is still exactly (shard, gen) and not
-- bound to another process of the same shard id.
-- KEYS[1] lease hash    ARGV[1] shard id    ARGV[2] gen
-- ARGV[3] the releasing process's incarnation (0: none)
-- Returns 1 released, 0 refused (not ours, or already gone). The generation
-- counter is left alone so the next claim still mints a higher generation.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'gen') == ARGV[2] then
  local inc = redis.call('HGET', KEYS[1], 'inc') or '0'
  if inc == ARGV[3] or inc == '0' then
    redis.call('DEL', KEYS[1])
    return 1
  end
end
return 0
