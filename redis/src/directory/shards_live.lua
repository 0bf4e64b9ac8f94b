-- Live registry entries; ids whose entry expired (the shard died) are pruned
-- from the set in the same step, so a shard heartbeating concurrently is
-- never pruned by mistake.
-- KEYS[1] registry id set    ARGV[1] registry key prefix ("telos:shard:")
-- Returns a list of HGETALL replies, one per live shard.
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local entry = redis.call('HGETALL', ARGV[1] .. id)
  if #entry == 0 then
    redis.call('SREM', KEYS[1], id)
  else
    out[#out + 1] = entry
  end
end
return out
