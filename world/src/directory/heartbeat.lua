-- A shard's presence heartbeat: rewrite its registry entry, restart its TTL
-- (on this server's clock) and make sure it is listed. One step, so a reader
-- never sees the id listed with a half-written entry.
-- KEYS[1] registry hash    KEYS[2] registry id set
-- ARGV[1] TTL, ms    ARGV[2..7] id, addr, state, players, capacity,
-- handoff version
redis.call('HSET', KEYS[1],
  'id', ARGV[2], 'addr', ARGV[3], 'state', ARGV[4],
  'players', ARGV[5], 'capacity', ARGV[6], 'handoff_version', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
