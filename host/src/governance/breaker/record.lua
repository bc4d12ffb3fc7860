-- Record an attempt's outcome (reference §7.4, M2.5 dual channel). Same algorithm as
-- memory.rs. KEYS: 1 the source's state hash. ARGV: 1 now_ms (0 = server clock) 2 outcome
-- (0 success, 1 failure, 2 rate limited, 3 result invalid, 4 source dead) 3 epoch
-- 4 probe (0/1) 5 threshold 6 cooldown_ms 7 max_cooldown_ms 8 fail_rate 9 min_calls
-- 10 bucket_ms 11 key_ttl_ms. Returns 1.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local h = KEYS[1]
local outcome = tonumber(ARGV[2])
local epoch = tonumber(ARGV[3])
local probe = tonumber(ARGV[4]) == 1
local threshold = tonumber(ARGV[5])
local cooldown = tonumber(ARGV[6])
local maxc = math.max(tonumber(ARGV[7]), cooldown)
local rate = tonumber(ARGV[8])
local min_calls = tonumber(ARGV[9])
local bucket = math.max(tonumber(ARGV[10]), 1)
local function num(f) return tonumber(redis.call('HGET', h, f) or '0') end
local st, ep, streak = num('st'), num('ep'), num('sk')

local function open_dur(s)
  local e = math.max(s - 1, 0)
  if e > 32 then e = 32 end
  return math.min(cooldown * (2 ^ e), maxc)
end
local function reset_buckets()
  redis.call('HSET', h, 'b0i', 0, 'b0c', 0, 'b0f', 0, 'b1i', 0, 'b1c', 0, 'b1f', 0)
end
local function open(d)
  redis.call('HSET', h, 'st', 1, 'ep', ep + 1, 'ou', now + d, 'cf', 0, 'pu', 0, 'sk', streak)
  reset_buckets()
end
local function close()
  redis.call('HSET', h, 'st', 0, 'ep', ep + 1, 'cf', 0, 'pu', 0, 'cs', now)
  reset_buckets()
end
local function sample(failed)
  local cur = math.floor(now / bucket)
  local slot = 'b' .. (cur % 2)
  if num(slot .. 'i') ~= cur then
    redis.call('HSET', h, slot .. 'i', cur, slot .. 'c', 0, slot .. 'f', 0)
  end
  redis.call('HINCRBY', h, slot .. 'c', 1)
  if failed then redis.call('HINCRBY', h, slot .. 'f', 1) end
end
local function window()
  local cur = math.floor(now / bucket)
  local calls, fails = 0, 0
  for _, s in ipairs({'b0', 'b1'}) do
    local i, c = num(s .. 'i'), num(s .. 'c')
    if c > 0 and (i == cur or i + 1 == cur) then
      calls = calls + c
      fails = fails + num(s .. 'f')
    end
  end
  return calls, fails
end

if probe then
  if st ~= 2 or ep ~= epoch then return 1 end
  if outcome == 0 or outcome == 3 then
    close()
  elseif outcome == 1 or outcome == 4 then
    streak = streak + 1
    open(open_dur(streak))
  else
    redis.call('HSET', h, 'pu', 0)
  end
elseif outcome == 0 or outcome == 3 then
  if outcome == 0 then sample(false) end
  if st == 0 then
    redis.call('HSET', h, 'cf', 0)
    if streak > 0 and now - num('cs') >= 2 * open_dur(streak) then
      redis.call('HSET', h, 'sk', 0)
    end
  end
elseif outcome == 1 then
  sample(true)
  if st == 0 and ep == epoch then
    local cf = redis.call('HINCRBY', h, 'cf', 1)
    local calls, fails = window()
    if cf >= threshold then
      open(cooldown)
    elseif calls >= min_calls and fails >= rate * calls then
      streak = streak + 1
      open(open_dur(streak))
    end
  end
elseif outcome == 4 then
  streak = streak + 1
  open(open_dur(streak))
end
redis.call('PEXPIRE', h, tonumber(ARGV[11]))
return 1
