-- ShardForZone then ClaimCharacter for a handoff, in one atomic step. The
-- destination is resolved first, and the next owner_epoch is minted only for
-- a live peer that speaks this shard's handoff version, so a refused move
-- never raises the row's epoch under a live session. One round trip instead
-- of two; the order of the seed's two steps is kept inside the script.
-- KEYS[1] zone lease hash   KEYS[2] pending-transfer hash {from, to}
-- KEYS[3] character row
-- ARGV[1] registry key prefix ("telos:shard:")   ARGV[2] this shard's id
-- ARGV[3] this shard's handoff version
-- The registry key is derived from the owner inside the script; Telos runs
-- against a single Redis (not Cluster), where that is allowed.
-- Returns {status, epoch, state_version, field, value, ...} (the owner's
-- registry entry), status being:
--   'none'    no live owner: the zone is free or its owner's entry expired
--   'self'    the zone is served by this shard
--   'version' the owner speaks another handoff version
--   'norow'   the character has no durable row yet
--   'minted'  epoch and state_version of the row after the mint
-- Only 'minted' wrote anything. While a transfer is pending, the zone
-- resolves to its target (routing moves at once), as in ShardForZone.
local owner = redis.call('HGET', KEYS[2], 'to')
if not owner then
  owner = redis.call('HGET', KEYS[1], 'owner')
end
if not owner then
  return {'none', '', ''}
end
local entry = redis.call('HGETALL', ARGV[1] .. owner)
if #entry == 0 then
  return {'none', '', ''}
end
local version = '0'
for i = 1, #entry, 2 do
  if entry[i] == 'handoff_version' then
    version = entry[i + 1]
  end
end
local status, epoch, state_version = 'minted', '', ''
if owner == ARGV[2] then
  status = 'self'
elseif version ~= ARGV[3] then
  status = 'version'
elseif redis.call('EXISTS', KEYS[3]) == 0 then
  status = 'norow'
else
  epoch = tostring(redis.call('HINCRBY', KEYS[3], 'owner_epoch', 1))
  state_version = redis.call('HGET', KEYS[3], 'state_version') or ''
end
local out = {status, epoch, state_version}
for i = 1, #entry do
  out[#out + 1] = entry[i]
end
return out
