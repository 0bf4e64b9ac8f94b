-- ShardForZone: the live lease's owner joined with its live registry entry,
-- read in one atomic step so a concurrent flip is seen entirely or not at all.
-- KEYS[1] lease hash    ARGV[1] registry key prefix ("telos:shard:")
-- The registry key is derived from the owner inside the script; Telos runs
-- against a single Redis (not Cluster), where that is allowed.
-- KEYS[2] pending-transfer hash {from, to}: while a transfer is pending,
-- routing goes to its target at once (the target parks opens until the
-- zone is open there).
-- Returns {owner, gen, field, value, ...} or nil (no owner, or owner not live).
local owner = redis.call('HGET', KEYS[2], 'to')
local gen = redis.call('HGET', KEYS[1], 'gen') or '0'
if not owner then
  owner = redis.call('HGET', KEYS[1], 'owner')
end
if not owner then
  return false
end
local entry = redis.call('HGETALL', ARGV[1] .. owner)
if #entry == 0 then
  return false
end
local out = {owner, gen}
for i = 1, #entry do
  out[#out + 1] = entry[i]
end
return out
