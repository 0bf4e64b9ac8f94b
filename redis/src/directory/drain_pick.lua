-- pickDrainTarget: which live peer the drain selector would choose now,
-- without reserving anything (placement of orphaned zones: every shard
-- asks, and only the one chosen claims).
-- KEYS[1] registry id set
-- ARGV[1] registry key prefix ("telos:shard:")
-- ARGV[2] reservation key prefix ("telos:drain:reserve:")
-- ARGV[3..] ids never to pick
-- Returns the chosen id, or nil when no live peer exists.
local skip = {}
for i = 3, #ARGV do
  skip[ARGV[i]] = true
end
local best = best_target(skip, now_ms())
if best == nil then
  return false
end
return best.id
