-- A gate reports that it cannot reach a shard that still heartbeats
-- (reach_check.lua says what the mark means). The first report of a run
-- keeps its time; every later one refreshes only when it was last said.
-- KEYS[1] the shard's mark hash    ARGV[1] the gate's id
-- ARGV[2] the mark's TTL, ms (it outlives the gates that stop saying it)
-- Returns how long, ms, this gate has said so.
local now = reach_now_ms()
local since = now
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  local s = string.match(held, '^(%d+) ')
  if s then
    since = tonumber(s)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], since .. ' ' .. now)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now - since
