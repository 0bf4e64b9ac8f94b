-- A shard's presence heartbeat: replace its registry entry whole (so a zone
-- it no longer counts, or a predecessor's counts, cannot linger), restart
-- its TTL (on this server's clock) and make sure it is listed. One step, so
-- a reader never sees the id listed with a half-written entry.
-- KEYS[1] registry hash    KEYS[2] registry id set
-- ARGV[1] TTL, ms    ARGV[2..7] id, addr, state, players, capacity,
-- handoff version    ARGV[8] the process's incarnation (0: none)
-- ARGV[9..] pairs: zone count field, players
-- KEYS[3] the shard's reachability mark (reach_check.lua): a live shard the
-- gates have cut off is published as 'cut_off' (no login, handoff, drain or
-- transfer picks it)
-- Returns 1 published, 2 published as cut off, or 0 when a newer process
-- of the same shard id owns the entry (this process has been superseded:
-- it writes nothing).
local current = tonumber(redis.call('HGET', KEYS[1], 'inc') or '0')
if current > tonumber(ARGV[8]) then
  return 0
end
local state = ARGV[4]
local cut = cut_off(KEYS[3])
if cut and state == 'live' then
  state = 'cut_off'
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1],
  'id', ARGV[2], 'addr', ARGV[3], 'state', state,
  'players', ARGV[5], 'capacity', ARGV[6], 'handoff_version', ARGV[7],
  'inc', ARGV[8])
for i = 9, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
if cut then
  return 2
end
return 1
