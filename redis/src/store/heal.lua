-- Heal a row that went back: Redis lost writes this session had been told
-- were durable (an AOF everysec crash, a restore, a failover to a lagging
-- replica), so the row is at an older state_version, or an older
-- owner_epoch, than the live session holding the newest epoch knows it
-- wrote. That session is the authority: its in-memory state contains
-- every line applied, so it rewrites the row — but only while no newer
-- owner exists (owner_epoch above the session's refuses), and only if the
-- row really went back: an older epoch (the claim that minted the
-- session's was lost too), or the session's own epoch *and* claim (see
-- owner_claim in mod.rs) at a version below the one it last wrote. The
-- same epoch under another claim is one a rollback let someone else mint
-- again: not this session's to overwrite.
-- KEYS[1] row hash
-- ARGV[1] epoch  ARGV[2] the version the session last wrote (its CAS base)
-- ARGV[3] state JSON  ARGV[4] conn_id  ARGV[5] applied_seq
-- ARGV[6] the session's claim id  ARGV[7] quit_seq (as in zone_commit.lua)
-- Returns {1, epoch, new_version, claim} healed, {0, current_epoch,
-- current_version, owner_claim} refused, {-1, 0, 0, ''} no such row. The new
-- version is above both the row's and the session's, so versions never go
-- back either.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0, 0, ''}
end
local epoch = tonumber(redis.call('HGET', KEYS[1], 'owner_epoch'))
local version = tonumber(redis.call('HGET', KEYS[1], 'state_version'))
local claim = redis.call('HGET', KEYS[1], 'owner_claim') or ''
local ours = tonumber(ARGV[1])
local base = tonumber(ARGV[2])
local went_back = epoch < ours or (epoch == ours and version < base and claim == ARGV[6])
if not went_back then
  return {0, epoch, version, claim}
end
local new_version = math.max(version, base) + 1
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'conn_id', ARGV[4],
  'applied_seq', ARGV[5], 'quit_seq', ARGV[7], 'owner_epoch', ARGV[1], 'owner_claim', ARGV[6],
  'state_version', string.format('%d', new_version))
return {1, ours, new_version, ARGV[6]}
