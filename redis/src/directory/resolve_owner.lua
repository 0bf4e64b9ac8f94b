-- ShardForZone's resolution, prepended to every script that routes by it
-- (shard_for_zone.lua, the handoff's claim_handoff.lua) so the rule lives
-- in one place: while a transfer is pending the zone resolves to its
-- target (routing moves at once), otherwise to the live lease's owner; then
-- that shard's live registry entry. The registry key is derived from the
-- owner inside the script; Telos runs against a single Redis (not Cluster),
-- where that is allowed.
-- Returns owner, gen, entry (a flat HGETALL), or nil when the zone is free
-- or its owner's registry entry has expired.
local function resolve_owner(lease_key, transfer_key, registry_prefix)
  local owner = redis.call('HGET', transfer_key, 'to')
  local gen = redis.call('HGET', lease_key, 'gen') or '0'
  if not owner then
    owner = redis.call('HGET', lease_key, 'owner')
  end
  if not owner then
    return nil
  end
  local entry = redis.call('HGETALL', registry_prefix .. owner)
  if #entry == 0 then
    return nil
  end
  return owner, gen, entry
end
