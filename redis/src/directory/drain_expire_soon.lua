-- expireDrainTargetSoon: bring one hold's expiry to at most now + within.
-- KEYS[1] target's reservation hash    ARGV[1] drainer id    ARGV[2] within, ms
-- Only ever shortens: a later expiry is left alone and a missing (or
-- expired) hold stays missing, so no caller can stretch a hold — a crashed
-- drainer's hold always ends by the TTL it was last reserved with.
-- Returns 1 shortened, 0 left alone.
local now = now_ms()
local holds = live_holds(KEYS[1], now)
local hold = holds[ARGV[1]]
if hold == nil then
  return 0
end
local soon = now + tonumber(ARGV[2])
if soon >= hold[2] then
  return 0
end
put_hold(KEYS[1], holds, ARGV[1], {hold[1], soon})
return 1
