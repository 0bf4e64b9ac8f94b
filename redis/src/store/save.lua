-- Fenced save: apply only if the row is still at the expected state_version
-- AND still owned by the saver's epoch; otherwise change nothing.
-- KEYS[1] row hash
-- ARGV[1] epoch  ARGV[2] expected state_version  ARGV[3] state JSON
-- ARGV[4] conn_id  ARGV[5] applied_seq
-- ARGV[6] quit_seq: applied_seq when this save ends the session with the
-- player's quit, 0 otherwise (see quit_seq in mod.rs)
-- Returns {1, epoch, new_version, owner_claim} saved, {0, current_epoch,
-- current_version, owner_claim} refused, {-1, 0, 0, ''} no such row. Numbers compare as the decimal strings
-- they were written as; the increment is HINCRBY's exact 64-bit arithmetic.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0, 0, ''}
end
local epoch = redis.call('HGET', KEYS[1], 'owner_epoch')
local version = redis.call('HGET', KEYS[1], 'state_version')
local claim = redis.call('HGET', KEYS[1], 'owner_claim') or ''
if epoch ~= ARGV[1] or version ~= ARGV[2] then
  return {0, epoch, version, claim}
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'conn_id', ARGV[4], 'applied_seq', ARGV[5],
  'quit_seq', ARGV[6])
local new_version = redis.call('HINCRBY', KEYS[1], 'state_version', 1)
return {1, epoch, new_version, claim}
