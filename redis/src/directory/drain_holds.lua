-- Shared prelude of every drain_*.lua script: drain.rs prepends it, so the
-- rules for reading and writing a hold live here and nowhere else.
--
-- A hold is one field of a target's reservation hash: field = drainer id,
-- value = "<count>:<expiry_ms>", the expiry on this server's clock (TIME).
-- Redis 7.0 has no per-field TTL, so an expired hold is pruned whenever a
-- script reads it; correctness comes from that. The hash's own PEXPIREAT
-- (its latest hold) only keeps a hash nobody reads from lingering forever.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Aborts the script with an error drain.rs maps to DirectoryError::Corrupt.
local function corrupt(key, reason)
  error({err = 'TELOSCORRUPT ' .. key .. ' ' .. reason})
end

local function pack_hold(count, expiry)
  return string.format('%d:%d', count, expiry)
end

-- Live holds of one target as {drainer = {count, expiry}} plus their count
-- sum; expired holds are deleted on the way (an expiry equal to now is over).
local function live_holds(key, now)
  local flat = redis.call('HGETALL', key)
  local holds, sum = {}, 0
  for i = 1, #flat, 2 do
    local count, expiry = string.match(flat[i + 1], '^(%d+):(%d+)$')
    if not count then
      corrupt(key, 'hold ' .. flat[i] .. ' is ' .. flat[i + 1])
    end
    count, expiry = tonumber(count), tonumber(expiry)
    if expiry <= now then
      redis.call('HDEL', key, flat[i])
    else
      holds[flat[i]] = {count, expiry}
      sum = sum + count
    end
  end
  return holds, sum
end

-- Writes `drainer`'s hold (or deletes it when `hold` is nil) and points the
-- hash's own expiry at its latest remaining hold. Pruning alone never moves
-- that maximum (the latest hold is the last to expire), so only writes call it.
local function put_hold(key, holds, drainer, hold)
  holds[drainer] = hold
  if hold then
    redis.call('HSET', key, drainer, pack_hold(hold[1], hold[2]))
  else
    redis.call('HDEL', key, drainer)
  end
  local latest = nil
  for _, h in pairs(holds) do
    if latest == nil or h[2] > latest then
      latest = h[2]
    end
  end
  -- No hold left: HDEL of the last field already removed the key.
  if latest then
    redis.call('PEXPIREAT', key, string.format('%d', latest))
  end
end

