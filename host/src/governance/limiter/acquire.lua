-- Atomic admission across the six gates (reference §7.3): global and source concurrency
-- (sorted sets of permit leases scored by expiry), RPM and TPM sliding windows (sorted sets
-- of permit ids scored by admission time; TPM tokens in a hash plus a running sum).
-- Either every gate passes and the permit is recorded, or nothing changes.
--
-- KEYS: 1 conc_g 2 conc_s 3 rpm_g 4 rpm_s 5 tpm_g 6 tpm_s 7 tok_g 8 tok_s 9 sum_g 10 sum_s
--       11 seq 12 permit key prefix (the permit's own key is KEYS[12] .. id)
-- ARGV: 1 now_ms (0 = the Redis server clock) 2 window_ms 3 lease_ttl_ms 4 est_tokens
--       5 global conc 6 source conc 7 global rpm 8 source rpm 9 global tpm 10 source tpm
--       11 key ttl_ms (every key expires) 12 source index (< 1024; folded into the permit id)
-- Returns {1, permit_id} or {0, gate (1..6 in Gate order), retry_after_ms (-1 = none)}.

local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local window = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local est = tonumber(ARGV[4])
local limit = {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]),
               tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])}
local key_ttl = tonumber(ARGV[11])

-- Expired leases free their concurrency slots.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
-- Entries that left the window.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - window)
local function prune_tpm(z, h, sum)
  local old = redis.call('ZRANGEBYSCORE', z, '-inf', now - window)
  if #old > 0 then
    local toks = redis.call('HMGET', h, unpack(old))
    local s = 0
    for _, v in ipairs(toks) do s = s + (tonumber(v) or 0) end
    redis.call('DECRBY', sum, s)
    redis.call('HDEL', h, unpack(old))
    redis.call('ZREM', z, unpack(old))
  end
end
prune_tpm(KEYS[5], KEYS[7], KEYS[9])
prune_tpm(KEYS[6], KEYS[8], KEYS[10])

-- Concurrency.
if limit[1] > 0 and redis.call('ZCARD', KEYS[1]) >= limit[1] then return {0, 1, -1} end
if limit[2] > 0 and redis.call('ZCARD', KEYS[2]) >= limit[2] then return {0, 2, -1} end
-- RPM: the (len - rpm)-th oldest entry must leave before one more fits.
local function rpm_wait(z, rpm)
  local len = redis.call('ZCARD', z)
  if rpm == 0 or len < rpm then return nil end
  local e = redis.call('ZRANGE', z, len - rpm, len - rpm, 'WITHSCORES')
  return math.max(1, tonumber(e[2]) + window - now)
end
local w = rpm_wait(KEYS[3], limit[3])
if w then return {0, 3, w} end
w = rpm_wait(KEYS[4], limit[4])
if w then return {0, 4, w} end
-- TPM: an estimate fits when the window is empty or it stays within the quota.
local function tpm_wait(z, h, sum, tpm)
  if tpm == 0 then return nil end
  local used = tonumber(redis.call('GET', sum) or '0')
  local function fits(u) return u <= 0 or u + est <= tpm end
  if fits(used) then return nil end
  local entries = redis.call('ZRANGE', z, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    used = used - (tonumber(redis.call('HGET', h, entries[i])) or 0)
    if fits(used) then return math.max(1, tonumber(entries[i + 1]) + window - now) end
  end
  return math.max(1, window)
end
w = tpm_wait(KEYS[5], KEYS[7], KEYS[9], limit[5])
if w then return {0, 5, w} end
w = tpm_wait(KEYS[6], KEYS[8], KEYS[10], limit[6])
if w then return {0, 6, w} end

-- Grant.
local id = redis.call('INCR', KEYS[11]) * 1024 + tonumber(ARGV[12])
redis.call('ZADD', KEYS[1], now + ttl, id)
redis.call('ZADD', KEYS[2], now + ttl, id)
redis.call('ZADD', KEYS[3], now, id)
redis.call('ZADD', KEYS[4], now, id)
redis.call('ZADD', KEYS[5], now, id)
redis.call('ZADD', KEYS[6], now, id)
redis.call('HSET', KEYS[7], id, est)
redis.call('HSET', KEYS[8], id, est)
redis.call('INCRBY', KEYS[9], est)
redis.call('INCRBY', KEYS[10], est)
-- The permit's lease key holds its expiry (so an injected clock works too); Redis drops it
-- a minute after the lease in real time.
redis.call('SET', KEYS[12] .. id, now + ttl, 'PX', ttl + 60000)
for i = 1, 11 do redis.call('PEXPIRE', KEYS[i], key_ttl) end
return {1, id}
