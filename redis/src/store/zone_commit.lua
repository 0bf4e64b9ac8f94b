-- One zone batch, committed whole or not at all: the zone's state (when it
-- changed) and every player row the batch touched, each with its
-- applied_seq. Refused whole unless the zone's lease is still exactly
-- (shard, gen), its state row is still held by this open, and every row is
-- still at the epoch and version its session writes under.
-- ARGV[1] zone keys: 2 (KEYS[1] zone state hash, KEYS[2] zone lease hash)
--         or 0 (a private instance: no lease, no zone row)
-- ARGV[2] shard id  ARGV[3] lease generation  ARGV[4] holder
-- ARGV[5] '1' to write the zone state whole, '0' to leave it  ARGV[6] its
-- bytes
-- ARGV[7] P, the number of the zone state's keyed parts written, then P
-- pairs from ARGV[8]: the part's key and its bytes ('' removes the part).
-- Parts are fields 'part:<key>'; writing any removes the whole 'state'
-- (the keyed form supersedes it).
-- Then per row, KEYS[zone keys + i] and 6 arguments from ARGV[R + 6(i-1)],
-- R = 8 + 2P:
-- epoch, expected state_version, state JSON, conn_id, applied_seq, quit_seq
-- (quit_seq: applied_seq when the write ends the session with a quit, else 0).
-- Last, ARGV[#ARGV]: the zone row's 'commits' counter as the committer last
-- left it ('' not to check): a row behind it lost commits (Redis lost
-- acknowledged writes) and its parts cannot be trusted to be current.
-- Returns {1, version_1, ..., version_n} committed; {0, 'lease'} or
-- {0, 'holder'} the zone fence refused; {0, 'behind', commits} the row's
-- counter is not the expected one; {0, 'row', i, epoch, version, claim} row
-- i refused; {-1, 'row', i} row i does not exist.
local zk = tonumber(ARGV[1])
local expect = ARGV[#ARGV]
if zk == 2 then
  if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2]
     or redis.call('HGET', KEYS[2], 'gen') ~= ARGV[3] then
    return {0, 'lease'}
  end
  if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[3]
     or redis.call('HGET', KEYS[1], 'holder') ~= ARGV[4] then
    return {0, 'holder'}
  end
  local commits = redis.call('HGET', KEYS[1], 'commits') or '0'
  if expect ~= '' and commits ~= expect then
    return {0, 'behind', commits}
  end
end
local parts = tonumber(ARGV[7])
local r = 8 + 2 * parts
local rows = #KEYS - zk
for i = 1, rows do
  local key = KEYS[zk + i]
  local a = r + 6 * (i - 1)
  if redis.call('EXISTS', key) == 0 then
    return {-1, 'row', i}
  end
  local epoch = redis.call('HGET', key, 'owner_epoch')
  local version = redis.call('HGET', key, 'state_version')
  if epoch ~= ARGV[a] or version ~= ARGV[a + 1] then
    return {0, 'row', i, epoch, version, redis.call('HGET', key, 'owner_claim') or ''}
  end
end
if zk == 2 and ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'state', ARGV[6])
end
if zk == 2 and parts > 0 then
  redis.call('HDEL', KEYS[1], 'state')
  for p = 0, parts - 1 do
    local field = 'part:' .. ARGV[8 + 2 * p]
    local value = ARGV[9 + 2 * p]
    if value == '' then
      redis.call('HDEL', KEYS[1], field)
    else
      redis.call('HSET', KEYS[1], field, value)
    end
  end
end
if zk == 2 then
  redis.call('HINCRBY', KEYS[1], 'commits', 1)
end
local out = {1}
for i = 1, rows do
  local key = KEYS[zk + i]
  local a = r + 6 * (i - 1)
  redis.call('HSET', key, 'state', ARGV[a + 2], 'conn_id', ARGV[a + 3],
    'applied_seq', ARGV[a + 4], 'quit_seq', ARGV[a + 5])
  out[i + 1] = redis.call('HINCRBY', key, 'state_version', 1)
end
return out
