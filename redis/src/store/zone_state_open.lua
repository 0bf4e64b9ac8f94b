-- Open a zone's state row: the zone's new actor takes the row over and
-- reads it, in one step (the zone state's ClaimCharacter).
-- KEYS[1] zone state hash {gen, holder, state}    KEYS[2] zone lease hash
-- ARGV[1] shard id    ARGV[2] lease generation    ARGV[3] holder (the
-- opening actor's random id)
-- Accepted only while the live lease is exactly (shard, gen) and no open
-- at a newer generation has taken the row over. Returns {1, state, gen}
-- (state false when nothing was ever saved) or {0, reason, row gen}, reason
-- 'lease' (the lease is not (shard, gen)) or 'stale' (the row was opened at
-- a newer generation). Generations compare as numbers. After {1, state,
-- gen, commits} (the row's commit counter) come the state's keyed parts,
-- key and bytes in turn (fields 'part:<key>', see zone_commit.lua).
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1]
   or redis.call('HGET', KEYS[2], 'gen') ~= ARGV[2] then
  return {0, 'lease', redis.call('HGET', KEYS[1], 'gen') or '0'}
end
local row_gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')
if row_gen > tonumber(ARGV[2]) then
  return {0, 'stale', tostring(row_gen)}
end
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'holder', ARGV[3])
local out = {1, redis.call('HGET', KEYS[1], 'state') or false, ARGV[2],
  redis.call('HGET', KEYS[1], 'commits') or '0'}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 5) == 'part:' then
    out[#out + 1] = string.sub(all[i], 6)
    out[#out + 1] = all[i + 1]
  end
end
return out
