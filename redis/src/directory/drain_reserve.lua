-- reserveDrainTarget: pick a drain target against the soft occupancy ceiling
-- and reserve headroom on it, in one step, so concurrent drains serialize
-- here and never both spend the same headroom.
-- KEYS[1] registry id set
-- ARGV[1] registry key prefix ("telos:shard:")
-- ARGV[2] reservation key prefix ("telos:drain:reserve:")
-- ARGV[3] drainer id    ARGV[4] count    ARGV[5] hold TTL, ms
-- ARGV[6..] ids never to pick (the drainer is never picked either)
-- The per-candidate keys are derived inside the script; Telos runs against a
-- single Redis (not Cluster), where that is allowed.
-- Returns nil when no live peer exists, else
-- {over_ceiling 0/1, target's reserved sum after this reserve, field, value, ...}
-- with the target's registry entry as HGETALL returns it.
local now = now_ms()
local drainer, want, ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local skip = {[drainer] = true}
for i = 6, #ARGV do
  skip[ARGV[i]] = true
end

-- headroom = capacity - players - every drainer's live holds. The candidate
-- with the most headroom both fits `want` if any peer does and, when none
-- does (every peer reservation-full), is the least overloaded one to admit
-- over the ceiling; ties go to the smallest id so the choice is repeatable.
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
if best == nil then
  return false
end

-- Accumulate onto this drainer's hold and rebase its expiry to now + TTL, so
-- the hold covers the drain from its latest reserve, not its first.
local prior = best.holds[drainer]
local count = want + (prior and prior[1] or 0)
put_hold(best.key, best.holds, drainer, {count, now + ttl})

local out = {best.headroom < want and 1 or 0, best.reserved + want}
for i = 1, #best.entry do
  out[#out + 1] = best.entry[i]
end
return out
