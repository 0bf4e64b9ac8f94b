-- ClaimCharacter: mint the next owner_epoch and read the row in one step, so
-- the claimant's copy of the row is exactly the one its epoch fences.
-- KEYS[1] row hash
-- ARGV[1] the claim id: who minted this epoch (see owner_claim in mod.rs)
-- ARGV[2] the gate connection the claim is made for
-- ARGV[3] which of that connection's attempts asks (0: not told)
-- ARGV[4..] the row fields to return, in order
-- Returns the HMGET of ARGV[4..] (owner_epoch already incremented); nil if
-- the character does not exist; 0 if a later attempt of the same
-- connection has claimed it already (this one was given up by its gate:
-- minting for it would fence the session that attempt put into play).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local attempt = tonumber(ARGV[3])
if attempt > 0 then
  local held = redis.call('HMGET', KEYS[1], 'claim_conn', 'claim_attempt')
  if held[1] == ARGV[2] and (tonumber(held[2]) or 0) > attempt then
    return 0
  end
end
redis.call('HINCRBY', KEYS[1], 'owner_epoch', 1)
redis.call('HSET', KEYS[1], 'owner_claim', ARGV[1], 'claim_conn', ARGV[2],
  'claim_attempt', ARGV[3])
return redis.call('HMGET', KEYS[1], unpack(ARGV, 4))
