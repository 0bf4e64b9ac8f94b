-- The destination's own ClaimCharacter after its Commit was refused or went
-- unanswered: mint the next owner_epoch only if the row is still at the
-- epoch the handoff minted (ARGV[1]). A newer one means someone else (a
-- login, a resume, a takeover) claimed the character meanwhile; minting over
-- it would evict a live owner, so nothing is minted.
-- KEYS[1] row hash    ARGV[1] the handoff's owner_epoch
-- Returns {minted (1 or 0), owner_epoch, state_version}, or nil if the
-- character does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local current = redis.call('HGET', KEYS[1], 'owner_epoch') or '0'
local version = redis.call('HGET', KEYS[1], 'state_version') or '0'
if current ~= ARGV[1] then
  return {0, current, version}
end
local epoch = redis.call('HINCRBY', KEYS[1], 'owner_epoch', 1)
return {1, tostring(epoch), version}
