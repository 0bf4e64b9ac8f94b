-- A login from this source succeeded: its attempt was not a failure after
-- all. Clear the pair's count and lock, take the attempt back from the
-- account's count, and remember the source as known for this account.
-- KEYS[1] pair count  KEYS[2] pair lock  KEYS[3] account count  KEYS[4] known source
-- ARGV[1] how long a source stays known, ms
redis.call('DEL', KEYS[1], KEYS[2])
if tonumber(redis.call('GET', KEYS[3]) or '0') > 0 then
  redis.call('DECR', KEYS[3])
end
redis.call('SET', KEYS[4], '1', 'PX', ARGV[1])
return 1
