-- Mint the next owner_epoch only from the epoch the caller holds (ARGV[1]):
-- the destination's own ClaimCharacter after its Commit was refused or went
-- unanswered (or behind it: a claim Redis lost). A newer one means someone else (a login, a resume, a
-- takeover) claimed the character meanwhile; minting over it would evict a
-- live owner, so nothing is minted — unless the newer epoch is this very
-- claim's (ARGV[2] is the row's owner_claim): an earlier run whose reply was
-- lost, answered again, so the call can be retried.
-- KEYS[1] row hash    ARGV[1] the epoch held    ARGV[2] the claim id
-- Returns {minted (1 or 0), owner_epoch, state_version}, or nil if the
-- character does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local current = redis.call('HGET', KEYS[1], 'owner_epoch') or '0'
local version = redis.call('HGET', KEYS[1], 'state_version') or '0'
local claim = redis.call('HGET', KEYS[1], 'owner_claim') or ''
if tonumber(current) > tonumber(ARGV[1]) then
  if claim == ARGV[2] then
    return {1, current, version}
  end
  return {0, current, version}
end
-- At the epoch held, or behind it (Redis lost the claim that minted it):
-- mint the one after it.
local epoch = string.format('%d', tonumber(ARGV[1]) + 1)
redis.call('HSET', KEYS[1], 'owner_epoch', epoch, 'owner_claim', ARGV[2])
return {1, epoch, version}
