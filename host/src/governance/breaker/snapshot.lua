-- Read one source's breaker for /healthz. KEYS: 1 the state hash. ARGV: 1 now_ms
-- (0 = server clock) 2 bucket_ms. Returns {state (0 closed, 1 open, 2 half-open),
-- retry_after_ms, consecutive, streak, window_calls, window_failures}.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local h = KEYS[1]
local function num(f) return tonumber(redis.call('HGET', h, f) or '0') end
local st, ou = num('st'), num('ou')
local retry = 0
if st == 1 then
  if now >= ou then st = 2 else retry = ou - now end
end
local bucket = math.max(tonumber(ARGV[2]), 1)
local cur = math.floor(now / bucket)
local calls, fails = 0, 0
for _, s in ipairs({'b0', 'b1'}) do
  local i, c = num(s .. 'i'), num(s .. 'c')
  if c > 0 and (i == cur or i + 1 == cur) then
    calls = calls + c
    fails = fails + num(s .. 'f')
  end
end
return {st, retry, num('cf'), num('sk'), calls, fails}
