-- Settle a reservation (budget/redis.rs): add ARGV[1] (actual − reserved, signed micro-USD)
-- to every KEYS entry that still exists; an expired period is left alone; never below 0.
local delta = tonumber(ARGV[1])
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('INCRBY', KEYS[i], delta)
    if v < 0 then
      redis.call('SET', KEYS[i], 0, 'KEEPTTL')
    end
  end
end
return 1
