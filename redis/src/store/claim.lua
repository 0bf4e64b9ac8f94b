-- ClaimCharacter: mint the next owner_epoch and read the row in one step, so
-- the claimant's copy of the row is exactly the one its epoch fences.
-- KEYS[1] row hash
-- ARGV[1] the claim id: who minted this epoch (see owner_claim in mod.rs)
-- ARGV[2..] the row fields to return, in order
-- Returns the HMGET of ARGV[2..] (owner_epoch already incremented), or nil
-- if the character does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
redis.call('HINCRBY', KEYS[1], 'owner_epoch', 1)
redis.call('HSET', KEYS[1], 'owner_claim', ARGV[1])
return redis.call('HMGET', KEYS[1], unpack(ARGV, 2))
