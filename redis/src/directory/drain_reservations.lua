-- The live holds on one target, expired ones pruned first.
-- KEYS[1] target's reservation hash
-- Returns {drainer, count, expiry_ms, ...}.
local holds = live_holds(KEYS[1], now_ms())
local out = {}
for drainer, hold in pairs(holds) do
  out[#out + 1] = drainer
  out[#out + 1] = hold[1]
  out[#out + 1] = hold[2]
end
return out
