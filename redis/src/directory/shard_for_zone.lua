-- ShardForZone: the live lease's owner (or a pending transfer's target)
-- joined with its live registry entry, read in one atomic step so a
-- concurrent flip is seen entirely or not at all. Runs after
-- resolve_owner.lua.
-- KEYS[1] lease hash    KEYS[2] pending-transfer hash {from, to}
-- ARGV[1] registry key prefix ("telos:shard:")
-- Returns {owner, gen, field, value, ...} or nil (no owner, or owner not live).
local owner, gen, entry = resolve_owner(KEYS[1], KEYS[2], ARGV[1])
if not owner then
  return false
end
local out = {owner, gen}
for i = 1, #entry do
  out[#out + 1] = entry[i]
end
return out
