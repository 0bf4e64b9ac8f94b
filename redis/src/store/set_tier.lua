-- Set a character's trust tier, only on an existing row (never create one).
-- KEYS[1] row hash    ARGV[1] tier (validated by the caller)
-- Returns 1 set, 0 no such character.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'tier', ARGV[1])
return 1
