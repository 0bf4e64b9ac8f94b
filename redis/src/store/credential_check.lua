-- Check a resume credential by its hash and, when it matches, restart the
-- pair's TTL (the one it was issued with) on this server's clock.
-- KEYS[1] credentials of one (character, connection) {h, d:<hash>..., ttl}
-- ARGV[1] sha256 hex of the presented credential
-- Every credential issued for the pair is a `d:<hash>` field; `h` is the
-- newest (the only one a shard before issue 17 wrote).
-- Returns 1 valid, 0 not.
local h = redis.call('HGET', KEYS[1], 'h')
if (h and h == ARGV[1]) or redis.call('HGET', KEYS[1], 'd:' .. ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], redis.call('HGET', KEYS[1], 'ttl'))
  return 1
end
return 0
