-- Create a character row if, and only if, the (lowercase) name is free.
-- KEYS[1] row hash
-- ARGV[1] display name  ARGV[2] argon2id PHC  ARGV[3] state JSON  ARGV[4] persist_id
-- ARGV[5] creator: the connection id that asked ('' for none), so that
--         connection's retry of a create that took effect is known as such
-- Returns 1 created, 0 name taken.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1],
  'name', ARGV[1], 'pw', ARGV[2], 'state', ARGV[3],
  'state_version', 1, 'owner_epoch', 0, 'owner_claim', '', 'conn_id', '', 'applied_seq', 0,
  'quit_seq', 0,
  'tier', 'player', 'persist_id', ARGV[4], 'creator', ARGV[5] or '')
return 1
