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

local best = best_target(skip, now)
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
