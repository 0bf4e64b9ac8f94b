-- A cleanly stopping shard leaves the registry: its entry and online list
-- go at once, so nobody routes to it or lists its players for the rest of
-- the TTL — unless a newer process of the same shard id owns the entry
-- now (then this one was superseded and must not remove its successor).
-- KEYS[1] registry hash    KEYS[2] online list    KEYS[3] registry id set
-- KEYS[4] event stream
-- ARGV[1] shard id    ARGV[2] the process's incarnation (0: none)
-- ARGV[3] the stream's MAXLEN
-- Returns 1 removed, 0 left to the newer process.
local current = tonumber(redis.call('HGET', KEYS[1], 'inc') or '0')
if current > tonumber(ARGV[2]) then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
-- The event is best effort (pcall): a Redis or an ACL that refuses XADD
-- (an operator's ACL from before telos:events) must not fail the script
-- after its writes, which a script cannot undo.
redis.pcall('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'kind', 'shard_left',
  'shard', ARGV[1], 'incarnation', ARGV[2])
return 1
