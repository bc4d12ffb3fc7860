-- Settle a permit (reference §7.3, plan-est-tokens-decoupling): replace its pre-charge by
-- the actual tokens in both TPM windows (refund or charge) and free its concurrency slots.
-- Idempotent: a permit already settled, or whose lease expired, changes nothing.
--
-- KEYS: 1 conc_g 2 conc_s 3 tok_g 4 tok_s 5 sum_g 6 sum_s 7 the permit's key
-- ARGV: 1 permit id 2 actual tokens 3 now_ms (0 = server clock)
-- Returns 1 when this call settled the permit, 0 otherwise.

local now = tonumber(ARGV[3])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local expiry = tonumber(redis.call('GET', KEYS[7]) or '-1')
if expiry < 0 then return 0 end
redis.call('DEL', KEYS[7])
-- A lease that expired: its slot was already freed and its pre-charge stays.
if now >= expiry then return 0 end
local id = ARGV[1]
local actual = tonumber(ARGV[2])
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
for _, pair in ipairs({{KEYS[3], KEYS[5]}, {KEYS[4], KEYS[6]}}) do
  local old = redis.call('HGET', pair[1], id)
  if old then
    redis.call('HSET', pair[1], id, actual)
    redis.call('INCRBY', pair[2], actual - tonumber(old))
  end
end
return 1
