-- Complete a zone transfer: accepted only if the zone is closed at exactly
-- the generation the source closed it at (no live lease, and no claim since:
-- the counter still reads that generation). Then, in one atomic step,
-- re-point the zone at the target (a fresh lease at the next generation)
-- and remove the pending record.
-- KEYS[1] lease hash  KEYS[2] generation counter  KEYS[3] transfer hash
-- KEYS[4] transfers set  KEYS[5] event stream
-- ARGV[1] zone  ARGV[2] from  ARGV[3] closed gen  ARGV[4] lease TTL ms
-- ARGV[5] pub/sub channel  ARGV[6] the stream's MAXLEN
-- Returns {status, gen}: 'completed' | 'no_record' | 'wrong_source' |
-- 'still_open' | 'stale' (gen = the new or current generation).
local from = redis.call('HGET', KEYS[3], 'from')
local to = redis.call('HGET', KEYS[3], 'to')
local counter = redis.call('GET', KEYS[2]) or '0'
if not from then
  return {'no_record', counter}
end
if from ~= ARGV[2] then
  return {'wrong_source', counter}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'still_open', counter}
end
if counter ~= ARGV[3] then
  return {'stale', counter}
end
local gen = redis.call('INCR', KEYS[2])
-- No process of the target is bound yet: its first renew binds one.
redis.call('HSET', KEYS[1], 'owner', to, 'gen', gen, 'inc', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
-- The move, with the proposer's cause and how long it was pending.
local cause = redis.call('HGET', KEYS[3], 'cause') or 'operator'
local created = tonumber(redis.call('HGET', KEYS[3], 'created_ms') or '0')
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The event is best effort (pcall): a Redis or an ACL that refuses XADD
-- (an operator's ACL from before telos:events) must not fail the script
-- after its writes, which a script cannot undo.
redis.pcall('XADD', KEYS[5], 'MAXLEN', '~', ARGV[6], '*', 'kind', 'zone_moved',
  'zone', ARGV[1], 'from', from, 'to', to, 'gen', gen, 'cause', cause,
  'pending_ms', math.max(0, now_ms - created))
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('PUBLISH', ARGV[5], ARGV[1])
return {'completed', tostring(gen)}
