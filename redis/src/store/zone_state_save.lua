-- Fenced save of a zone's state: apply only while the live lease is
-- exactly (shard, gen) and the row is still held by the actor that opened
-- it at that generation; otherwise change nothing.
-- KEYS[1] zone state hash {gen, holder, state}    KEYS[2] zone lease hash
-- ARGV[1] shard id    ARGV[2] lease generation    ARGV[3] holder
-- ARGV[4] state bytes
-- Returns {1, 'saved'} or {0, reason} with reason 'lease' (the lease is not
-- (shard, gen): expired, flipped, re-minted) or 'holder' (another open took
-- the row over).
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1]
   or redis.call('HGET', KEYS[2], 'gen') ~= ARGV[2] then
  return {0, 'lease'}
end
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[2]
   or redis.call('HGET', KEYS[1], 'holder') ~= ARGV[3] then
  return {0, 'holder'}
end
redis.call('HSET', KEYS[1], 'state', ARGV[4])
return {1, 'saved'}
