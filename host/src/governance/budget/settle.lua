-- Settle a reservation (budget/redis.rs): add ARGV[1] (actual - reserved, signed integer
-- micro-USD) to every KEYS entry that still exists, never below 0; a period whose key has
-- expired is left alone. INCRBY keeps the key's TTL.
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('INCRBY', KEYS[i], ARGV[1])
    if v < 0 then
      redis.call('SET', KEYS[i], 0, 'KEEPTTL')
    end
  end
end
return 1
