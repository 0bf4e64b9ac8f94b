-- retireDrainTargets: drop a drainer's holds on several targets (a clean
-- hand-over no longer needs them).
-- KEYS[1..n] the targets' reservation hashes    ARGV[1] drainer id
-- Returns, per key, 1 when the hold was already gone (expired or never
-- there), 0 when this call retired it.
local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local holds = live_holds(key, now)
  if holds[ARGV[1]] then
    put_hold(key, holds, ARGV[1], nil)
    out[i] = 0
  else
    out[i] = 1
  end
end
return out
