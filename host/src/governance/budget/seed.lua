-- Seed one period's total (budget/redis.rs, docs/budgets.md#restarts): set KEYS[1] to
-- ARGV[2] micro-USD when it is absent or lower; never lower it.
-- ARGV: 1 now_ms ('' = the server's TIME), 2 total, 3 when the key expires (Unix ms of the
-- period's end + 1 day, or -1 for none). A period already past that is not seeded.
-- Returns 1 when it set the key, 0 otherwise.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local expires = tonumber(ARGV[3])
if expires >= 0 and expires <= now then return 0 end
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
if cur >= tonumber(ARGV[2]) then return 0 end
if expires >= 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', expires - now)
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
