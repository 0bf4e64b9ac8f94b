-- drain_select.lua (prepended after drain_holds.lua): the one rule that
-- picks the live peer with the most headroom, shared by the reserving
-- drain selector and the read-only placement pick (orphaned zones).
--
-- headroom = capacity - players - every drainer's live holds. The candidate
-- with the most headroom both fits `want` if any peer does and, when none
-- does (every peer reservation-full), is the least overloaded one to admit
-- over the ceiling; ties go to the smallest id so the choice is repeatable.
local function best_target(skip, now)
  local best = nil
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    if not skip[id] then
      local entry = redis.call('HGETALL', ARGV[1] .. id)
      local f = {}
      for i = 1, #entry, 2 do
        f[entry[i]] = entry[i + 1]
      end
      -- An empty entry is a dead shard; a draining one takes no new zones.
      if f.state == 'live' then
        local capacity, players = tonumber(f.capacity), tonumber(f.players)
        if capacity == nil or players == nil then
          corrupt(ARGV[1] .. id, 'capacity or players is not a number')
        end
        local key = ARGV[2] .. id
        local holds, reserved = live_holds(key, now)
        local headroom = capacity - players - reserved
        if best == nil or headroom > best.headroom
           or (headroom == best.headroom and id < best.id) then
          best = {id = id, entry = entry, key = key, holds = holds,
                  reserved = reserved, headroom = headroom}
        end
      end
    end
  end
  return best
end
