-- Renew a zone lease only if it is still live and exactly (shard, gen), and
-- bound to the renewing process (or to none yet: then it is bound to it).
-- KEYS[1] lease hash    ARGV[1] shard id    ARGV[2] gen    ARGV[3] TTL, ms
-- ARGV[4] the renewing process's incarnation (0: none)
-- KEYS[2] the shard's reachability mark (reach_check.lua): a shard the
-- gates have cut off is refused, and its zone fences as on any refusal.
-- Returns 1 renewed, 0 refused. An expired lease is never revived: a renewal
-- that arrives late must lose, because another shard may already have claimed.
-- Generations compare as decimal strings, exactly as they were written.
if cut_off(KEYS[2]) then
  return 0
end
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'gen') == ARGV[2] then
  local inc = redis.call('HGET', KEYS[1], 'inc') or '0'
  if inc == ARGV[4] or inc == '0' then
    redis.call('HSET', KEYS[1], 'inc', ARGV[4])
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return 1
  end
end
return 0
