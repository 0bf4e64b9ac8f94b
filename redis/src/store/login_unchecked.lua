-- An admitted login was never checked (the shard could not hash it now, or
-- could not read the row): it is not a failure. Take it back from both
-- counts and, if it armed the pair's lock, lift that lock, so a player
-- whose gate retries on another shard during a login storm is not locked
-- out by attempts that were never judged.
-- KEYS[1] pair count  KEYS[2] pair lock  KEYS[3] account count
-- ARGV[1] 1 when this attempt armed the lock
for _, k in ipairs({KEYS[1], KEYS[3]}) do
  if tonumber(redis.call('GET', k) or '0') > 0 then
    redis.call('DECR', k)
  end
end
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[2])
end
return 1
