-- Read-only usage of one gate group for /healthz: in-flight leases, requests and tokens in
-- the window. KEYS: 1 conc 2 rpm 3 tpm 4 tok. ARGV: 1 now_ms (0 = server clock) 2 window_ms.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local since = '(' .. (now - tonumber(ARGV[2]))
local inflight = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local reqs = redis.call('ZCOUNT', KEYS[2], since, '+inf')
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], since, '+inf')
local toks = 0
if #ids > 0 then
  for _, v in ipairs(redis.call('HMGET', KEYS[4], unpack(ids))) do toks = toks + (tonumber(v) or 0) end
end
return {inflight, reqs, toks}
