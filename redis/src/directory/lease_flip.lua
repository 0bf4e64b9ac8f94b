-- Fenced hand-over of a zone lease (HandoverZone): one atomic step from the
-- live owner to the next, so ShardForZone never sees the zone ownerless.
-- KEYS[1] lease hash    KEYS[2] generation counter    KEYS[3] event stream
-- ARGV[1] from shard    ARGV[2] expected gen    ARGV[3] to shard    ARGV[4] TTL, ms
-- ARGV[5] zone    ARGV[6] cause (drain)    ARGV[7] the stream's MAXLEN
-- Returns the new generation, or nil when the live lease is not exactly
-- (from, expected gen) — including when it has expired.
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'gen') == ARGV[2] then
  local gen = redis.call('INCR', KEYS[2])
  -- No process of the new owner is bound yet: its first claim binds one.
  redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'gen', gen, 'inc', '0')
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  -- The event is best effort (pcall): a Redis or an ACL that refuses XADD
  -- (an operator's ACL from before telos:events) must not fail the script
  -- after its writes, which a script cannot undo.
  redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'kind', 'zone_moved',
    'zone', ARGV[5], 'from', ARGV[1], 'to', ARGV[3], 'gen', gen, 'cause', ARGV[6])
  return gen
end
return false
