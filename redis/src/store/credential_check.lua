-- Check a resume credential by its hash and, when it matches, restart its
-- TTL (the one it was issued with) on this server's clock.
-- KEYS[1] credential hash {h, ttl}    ARGV[1] sha256 hex of the presented credential
-- Returns 1 valid, 0 not.
local h = redis.call('HGET', KEYS[1], 'h')
if h and h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], redis.call('HGET', KEYS[1], 'ttl'))
  return 1
end
return 0
