-- The budget of failed logins whose Login.client_addr is trusted, per
-- caller certificate (a token bucket kept on the server's clock): a caller
-- that names many sources spends it, then its logins count as its own.
-- KEYS[1] the caller's budget (hash: tokens, at)
-- ARGV[1] burst   ARGV[2] ms per token refilled   ARGV[3] 'take' or 'peek'
-- Returns 1 while the budget holds a token (taking it for 'take'), else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local burst = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(v[1]) or burst
local at = tonumber(v[2]) or now
tokens = math.min(burst, tokens + math.max(now - at, 0) / per)
if tokens < 1 then
  return 0
end
if ARGV[3] == 'take' then
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  -- Forgotten once it would be full again anyway.
  redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * per) + 1)
end
return 1
