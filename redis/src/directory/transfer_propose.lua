-- Propose a zone transfer: the one validating step shared by telosctl and
-- Admin.TransferZone.
-- KEYS[1] known zones set   KEYS[2] lease hash   KEYS[3] transfer hash
-- KEYS[4] transfers set     KEYS[5] target registry hash
-- KEYS[6] event stream
-- ARGV[1] zone  ARGV[2] target shard id  ARGV[3] pub/sub channel
-- ARGV[4] cause (operator | rebalance)  ARGV[5] the stream's MAXLEN
-- Returns {status, detail}: status 'recorded' | 'already' | error code
-- 'unknown_zone' | 'unknown_shard' | 'shard_not_live' | 'no_capacity' |
-- 'unowned' | 'already_there' | 'conflict' (detail names the pending pair).
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
  return {'unknown_zone', ARGV[1]}
end
local pending_from = redis.call('HGET', KEYS[3], 'from')
if pending_from then
  local pending_to = redis.call('HGET', KEYS[3], 'to')
  if pending_to == ARGV[2] then
    return {'already', pending_from .. '->' .. pending_to}
  end
  return {'conflict', pending_from .. '->' .. pending_to}
end
if redis.call('EXISTS', KEYS[5]) == 0 then
  return {'unknown_shard', ARGV[2]}
end
if redis.call('HGET', KEYS[5], 'state') ~= 'live' then
  return {'shard_not_live', ARGV[2]}
end
local players = tonumber(redis.call('HGET', KEYS[5], 'players') or '0')
local capacity = tonumber(redis.call('HGET', KEYS[5], 'capacity') or '0')
if players >= capacity then
  return {'no_capacity', players .. '/' .. capacity}
end
local owner = redis.call('HGET', KEYS[2], 'owner')
if not owner then
  return {'unowned', ARGV[1]}
end
if owner == ARGV[2] then
  return {'already_there', owner}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[3], 'from', owner, 'to', ARGV[2], 'created_ms', now_ms,
  'cause', ARGV[4])
-- The event is best effort (pcall): a Redis or an ACL that refuses XADD
-- (an operator's ACL from before telos:events) must not fail the script
-- after its writes, which a script cannot undo.
redis.pcall('XADD', KEYS[6], 'MAXLEN', '~', ARGV[5], '*', 'kind', 'transfer_proposed',
  'zone', ARGV[1], 'from', owner, 'to', ARGV[2], 'cause', ARGV[4])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return {'recorded', owner .. '->' .. ARGV[2]}
