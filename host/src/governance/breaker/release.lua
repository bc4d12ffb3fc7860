-- Give a half-open probe lease back without a verdict (idempotent; fenced by epoch).
-- KEYS: 1 the source's state hash. ARGV: 1 epoch. Returns 1.
local h = KEYS[1]
if tonumber(redis.call('HGET', h, 'st') or '0') == 2
   and tonumber(redis.call('HGET', h, 'ep') or '0') == tonumber(ARGV[1]) then
  redis.call('HSET', h, 'pu', 0)
end
return 1
