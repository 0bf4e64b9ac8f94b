-- releaseDrainTarget: give back part of one drainer's hold on a target — the
-- count a single hand-over reserved when that hand-over did not happen (the
-- target refused AdoptZone, or the lease flip was refused).
-- KEYS[1] target's reservation hash    ARGV[1] drainer id    ARGV[2] count
-- Only the count shrinks: the expiry is left exactly as it was (no caller can
-- stretch a hold), and a hold released to zero is deleted. The rest of the
-- hold — the same drainer's other hand-overs onto this target, whose players
-- may still be in flight — stays reserved until retired or expired.
-- Returns the count left (0 when the hold is gone, or was already).
local now = now_ms()
local holds = live_holds(KEYS[1], now)
local hold = holds[ARGV[1]]
if hold == nil then
  return 0
end
local left = hold[1] - tonumber(ARGV[2])
if left <= 0 then
  put_hold(KEYS[1], holds, ARGV[1], nil)
  return 0
end
put_hold(KEYS[1], holds, ARGV[1], {left, hold[2]})
return left
