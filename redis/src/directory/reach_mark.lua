-- A gate reports that it cannot reach a shard that still heartbeats
-- (reach_check.lua says what the mark means). A report continues the
-- gate's run only while its last one is fresh (within REACH_STALE_MS, and
-- not ahead of this server's clock: a failover to a primary whose clock is
-- behind); otherwise it starts a new run. So a field left behind — a reply
-- lost, a shard that left the registry while marked — never makes one
-- later failed probe look like a long run.
-- KEYS[1] the shard's mark hash    ARGV[1] the gate's id
-- ARGV[2] the mark's TTL, ms (it outlives the gates that stop saying it)
-- Returns how long, ms, this gate's run has lasted.
local now = reach_now_ms()
local since = now
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local s, seen = string.match(held, '^(%d+) (%d+)$')
  if s and tonumber(s) <= tonumber(seen) and tonumber(seen) <= now
     and now - tonumber(seen) <= REACH_STALE_MS then
    since = tonumber(s)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], since .. ' ' .. now)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now - since
