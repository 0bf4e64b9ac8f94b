-- Claim a zone lease (atomic; the TTL runs on this server's clock).
-- KEYS[1] lease hash {owner, gen, inc}    KEYS[2] generation counter (never expires)
-- ARGV[1] claiming shard id    ARGV[2] lease TTL, ms
-- ARGV[3] the claiming process's incarnation (0: none)
-- KEYS[3] event stream    ARGV[4] zone    ARGV[5] the stream's MAXLEN
-- ARGV[6] 1: every earlier process of the claiming shard id is proven gone
--         (it took the shard's lock file at once), 0: not proven
-- KEYS[4] the claiming shard's reachability mark (reach_check.lua): a shard
--         the gates have cut off claims nothing (answered as held, by no
--         owner: '')
-- Returns {1, gen, owner} when the caller now holds the lease (newly minted,
-- or its own live lease refreshed at the same generation), {0, gen, owner}
-- when another shard — or another process of the caller's own shard id —
-- holds it.
--
-- One fencing token per process: a live lease is refreshed only for the
-- incarnation it is bound to. A lease no process is bound to yet (`inc`
-- absent or 0: just flipped to this shard, or re-pointed by a transfer's
-- completion) is bound to the first process of its owner that claims it.
-- A restarted process never takes over its predecessor's live lease at
-- the same generation: the predecessor may only be paused, so the new one
-- waits for the lease to lapse and then mints a generation of its own —
-- unless it proved every earlier process gone (ARGV[6]): then a lease an
-- earlier incarnation of its own shard holds is minted anew at once.
local owner = redis.call('HGET', KEYS[1], 'owner')
if cut_off(KEYS[4]) then
  return {0, redis.call('HGET', KEYS[1], 'gen') or '0', ''}
end
local cause = 'claim'
if owner then
  local gen = redis.call('HGET', KEYS[1], 'gen')
  if owner ~= ARGV[1] then
    return {0, gen, owner}
  end
  local inc = redis.call('HGET', KEYS[1], 'inc') or '0'
  if inc == ARGV[3] or inc == '0' then
    redis.call('HSET', KEYS[1], 'inc', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, gen, owner}
  end
  if ARGV[6] ~= '1' or tonumber(inc) >= tonumber(ARGV[3]) then
    return {0, gen, owner}
  end
  cause = 'restart'
end
-- Free: mint from the counter, which outlives every lease, so a zone claimed
-- again after an expiry gets a generation above any fence a dead owner holds.
local gen = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'gen', gen, 'inc', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- The event is best effort (pcall): a Redis or an ACL that refuses XADD
-- (an operator's ACL from before telos:events) must not fail the script
-- after its writes, which a script cannot undo.
redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'kind', 'zone_claimed',
  'zone', ARGV[4], 'shard', ARGV[1], 'gen', gen, 'cause', cause)
return {1, gen, ARGV[1]}
