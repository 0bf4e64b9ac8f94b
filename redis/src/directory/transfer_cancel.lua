-- Cancel a pending transfer with a reason (kept for status).
-- KEYS[1] transfer hash  KEYS[2] transfers set  KEYS[3] cancelled-reason key
-- ARGV[1] zone  ARGV[2] expected from  ARGV[3] expected to  ARGV[4] reason
-- ARGV[5] reason TTL ms  ARGV[6] pub/sub channel
-- Returns 1 cancelled, 0 no such record (or a different one now).
if redis.call('HGET', KEYS[1], 'from') ~= ARGV[2]
   or redis.call('HGET', KEYS[1], 'to') ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
redis.call('PUBLISH', ARGV[6], ARGV[1])
return 1
