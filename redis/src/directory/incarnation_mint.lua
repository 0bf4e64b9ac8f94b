-- Mint a starting process's incarnation: the next value of its shard id's
-- counter, which never expires. A script (not a bare INCR) so that behind
-- Sentinel it is acknowledged only once a replica has it: a counter that
-- went back in a failover would give two processes one fencing token.
-- KEYS[1] the shard id's incarnation counter
return redis.call('INCR', KEYS[1])
