-- ShardForZone then ClaimCharacter for a handoff, in one atomic step. The
-- destination is resolved first, and the next owner_epoch is minted only for
-- a live peer that speaks this shard's handoff version, so a refused move
-- never raises the row's epoch under a live session. One round trip instead
-- of two; the order of the seed's two steps is kept inside the script.
-- The mint is a compare-and-set on the epoch the departing session holds
-- (ARGV[4]): a session superseded by a newer claim (a login, a takeover, a
-- resume elsewhere) never mints over it. An epoch this very claim (ARGV[5],
-- the departure's claim id, kept in owner_claim) minted on an earlier run
-- whose reply was lost is answered again, so an attempt can be retried.
-- KEYS[1] zone lease hash   KEYS[2] pending-transfer hash {from, to}
-- KEYS[3] character row
-- ARGV[1] registry key prefix ("telos:shard:")   ARGV[2] this shard's id
-- ARGV[3] this shard's handoff version   ARGV[4] the epoch the session holds
-- ARGV[5] the departure's claim id
-- Runs after resolve_owner.lua (ShardForZone's rule, shared).
-- Returns {status, epoch, field, value, ...} (the owner's registry entry),
-- status being:
--   'none'    no live owner: the zone is free or its owner's entry expired
--   'self'    the zone is served by this shard
--   'malformed' the owner's registry entry lacks a field the caller needs
--   'version' the owner speaks another handoff version
--   'norow'   the character has no durable row yet
--   'moved'   the row's owner_epoch is newer than the session's, and not
--             this claim's: the session is superseded (epoch = the row's)
--   'minted'  the row's owner_epoch after the mint (or after this claim's
--             earlier mint)
-- Only 'minted' wrote anything.
local owner, _, entry = resolve_owner(KEYS[1], KEYS[2], ARGV[1])
if not owner then
  return {'none', ''}
end
local field = {}
for i = 1, #entry, 2 do
  field[entry[i]] = entry[i + 1]
end
local version = field['handoff_version'] or '0'
-- A shard the gates have cut off gives its zones up (reach_check.lua):
-- between owners, as a zone whose lease is moving.
if field['state'] == 'cut_off' then
  return {'none', ''}
end
-- Never mint for an entry the caller cannot use: a malformed one is
-- reported without raising the epoch under the staying session.
local usable = field['id'] and field['addr'] and tonumber(field['players'])
  and tonumber(field['capacity'])
  and (field['state'] == 'live' or field['state'] == 'draining')
local status, epoch = 'minted', ''
if not usable then
  status = 'malformed'
elseif owner == ARGV[2] then
  status = 'self'
elseif version ~= ARGV[3] then
  status = 'version'
elseif redis.call('EXISTS', KEYS[3]) == 0 then
  status = 'norow'
else
  local current = redis.call('HGET', KEYS[3], 'owner_epoch') or '0'
  local claim = redis.call('HGET', KEYS[3], 'owner_claim') or ''
  if tonumber(current) <= tonumber(ARGV[4]) then
    -- At the session's epoch, or behind it (Redis lost the claim that
    -- minted it): mint the one after the session's.
    epoch = string.format('%d', tonumber(ARGV[4]) + 1)
    redis.call('HSET', KEYS[3], 'owner_epoch', epoch, 'owner_claim', ARGV[5])
  elseif claim == ARGV[5] then
    epoch = current
  else
    status, epoch = 'moved', current
  end
end
local out = {status, epoch}
for i = 1, #entry do
  out[#out + 1] = entry[i]
end
return out
