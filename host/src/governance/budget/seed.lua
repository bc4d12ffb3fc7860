-- Seed one period's total when absent (budget/redis.rs): KEYS[1], ARGV[1] total micro-USD,
-- ARGV[2] expiry (Unix ms, or -1 for none). An existing value is never lowered.
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local v = tonumber(ARGV[1])
if cur < v then
  redis.call('SET', KEYS[1], v)
  if tonumber(ARGV[2]) >= 0 then
    redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[2]))
  end
end
return 1
