-- ShardForZone: the live lease's owner joined with its live registry entry,
-- read in one atomic step so a concurrent flip is seen entirely or not at all.
-- KEYS[1] lease hash    ARGV[1] registry key prefix ("telos:shard:")
-- The registry key is derived from the owner inside the script; Telos runs
-- against a single Redis (not Cluster), where that is allowed.
-- Returns {owner, gen, field, value, ...} or nil (no owner, or owner not live).
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return false
end
local gen = redis.call('HGET', KEYS[1], 'gen')
local entry = redis.call('HGETALL', ARGV[1] .. owner)
if #entry == 0 then
  return false
end
local out = {owner, gen}
for i = 1, #entry do
  out[#out + 1] = entry[i]
end
return out
