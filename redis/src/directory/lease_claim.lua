-- Claim a zone lease (atomic; the TTL runs on this server's clock).
-- KEYS[1] lease hash {owner, gen}    KEYS[2] generation counter (never expires)
-- ARGV[1] claiming shard id          ARGV[2] lease TTL, ms
-- Returns {1, gen, owner} when the caller now holds the lease (newly minted,
-- or its own live lease refreshed at the same generation), {0, gen, owner}
-- when another shard holds it.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner then
  local gen = redis.call('HGET', KEYS[1], 'gen')
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, gen, owner}
  end
  return {0, gen, owner}
end
-- Free: mint from the counter, which outlives every lease, so a zone claimed
-- again after an expiry gets a generation above any fence a dead owner holds.
local gen = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'gen', gen)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, gen, ARGV[1]}
