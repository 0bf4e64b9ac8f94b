-- Reachability is part of the lease (issue 30): whether the gates have
-- reported a shard unreachable long enough that it must give its zones up.
-- Prepended to the scripts that renew, claim and publish for a shard.
--
-- The mark (a hash; written by reach_mark.lua) holds, per gate, when that
-- gate first found the shard unreachable and when it last said so, both on
-- this server's clock: "since_ms seen_ms". A gate still saying so (seen
-- within REACH_STALE_MS) that has said so again and again for
-- REACH_BOUND_MS (from its first report to its latest, with no answer
-- between: an answer takes the field back) cuts the shard off, so one slow
-- probe never does; a gate that stopped saying so (it reaches the shard
-- again, or it died) no longer counts.
local REACH_BOUND_MS = 3000
local REACH_STALE_MS = 4000

local function reach_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function cut_off(mark_key)
  local marks = redis.call('HGETALL', mark_key)
  if #marks == 0 then
    return false
  end
  local now = reach_now_ms()
  for i = 2, #marks, 2 do
    local since, seen = string.match(marks[i], '^(%d+) (%d+)$')
    if since and tonumber(seen) <= now and now - tonumber(seen) <= REACH_STALE_MS
       and tonumber(seen) - tonumber(since) >= REACH_BOUND_MS then
      return true
    end
  end
  return false
end
