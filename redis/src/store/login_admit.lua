-- Admit one login attempt, or refuse it for now, BEFORE its password is
-- checked, and count it as a failure until it succeeds (login_succeeded.lua
-- takes it back): concurrent guesses cannot all slip in before the first
-- one's verdict.
-- KEYS[1] pair count (account, source bucket)   KEYS[2] pair lock
-- KEYS[3] account count                         KEYS[4] account throttle slot
-- KEYS[5] known source (this bucket logged in to this account lately)
-- ARGV[1] lock after N pair failures   ARGV[2] first lock ms   ARGV[3] lock cap ms
-- ARGV[4] throttle after N account failures   ARGV[5] throttle interval ms
-- ARGV[6] failures are remembered this long after the last, ms
-- Returns {1, armed_ms}: admitted (armed_ms > 0: this attempt locked the
-- pair for that long if it fails); {0, wait_ms}: refused for wait_ms.
local locked = redis.call('PTTL', KEYS[2])
if locked > 0 then
  return {0, locked}
end
local account = tonumber(redis.call('GET', KEYS[3]) or '0')
if account >= tonumber(ARGV[4]) and redis.call('EXISTS', KEYS[5]) == 0 then
  -- Throttled, never shut: one attempt per interval from sources that
  -- have not logged in to this account lately.
  if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[5]) then
    return {0, math.max(redis.call('PTTL', KEYS[4]), 1)}
  end
end
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
local after = tonumber(ARGV[1])
if n < after then
  return {1, 0}
end
-- Doubles with every attempt past the limit, up to the cap (an exponent
-- past 60 is far beyond any cap, and keeps the arithmetic exact).
local lock = math.min(tonumber(ARGV[2]) * 2 ^ math.min(n - after, 60), tonumber(ARGV[3]))
lock = string.format('%d', lock)
redis.call('SET', KEYS[2], '1', 'PX', lock)
return {1, tonumber(lock)}
