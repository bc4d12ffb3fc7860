-- Breaker gate for one attempt (reference §7.4): closed → allowed; open before its cooldown
-- ends → rejected with the remaining cooldown; otherwise half-open with exactly one probe
-- lease (TTL). KEYS: 1 the source's state hash. ARGV: 1 now_ms (0 = server clock)
-- 2 probe_ttl_ms 3 key_ttl_ms. Returns {kind (0 allowed, 1 probe, 2 rejected), epoch,
-- retry_after_ms}.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local h = KEYS[1]
local st = tonumber(redis.call('HGET', h, 'st') or '0')
local ep = tonumber(redis.call('HGET', h, 'ep') or '0')
if st == 0 then return {0, ep, 0} end
local ou = tonumber(redis.call('HGET', h, 'ou') or '0')
if st == 1 and now < ou then return {2, ep, ou - now} end
local pu = tonumber(redis.call('HGET', h, 'pu') or '0')
if st == 2 and pu > 0 and now < pu then return {2, ep, 0} end
ep = ep + 1
redis.call('HSET', h, 'st', 2, 'ep', ep, 'pu', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', h, tonumber(ARGV[3]))
return {1, ep, 0}
