-- Reserve ARGV[2] micro-USD against every budget line, atomically (budget/redis.rs).
-- ARGV: now_ms ('' = the server's TIME), amount, dry ('1': only read the totals),
--       then per line: bucket, period (daily|weekly|monthly|total), limit.
-- Keys are built here from the key prefix (ARGV[4+3n] = prefix), because the period a line
-- falls in depends on the clock read inside the script.
-- Returns {1, start_1, total_1, ...} when granted (totals after the reservation), or
-- {0, index, total, resets_ms or -1} for the first line without room (nothing changed).
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local amount = tonumber(ARGV[2])
local dry = ARGV[3] == '1'
local prefix = ARGV[4]
local DAY = 86400000

-- H. Hinnant's civil_from_days / days_from_civil (budget/period.rs has the same).
local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return y, m
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mm
  if m > 2 then mm = m - 3 else mm = m + 9 end
  local doy = math.floor((153 * mm + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function window(period)
  local day = math.floor(now / DAY)
  if period == 'daily' then
    return day * DAY, (day + 1) * DAY
  elseif period == 'weekly' then
    local monday = day - ((day + 3) % 7)
    return monday * DAY, (monday + 7) * DAY
  elseif period == 'monthly' then
    local y, m = civil_from_days(day)
    local ny, nm = y, m + 1
    if m == 12 then ny, nm = y + 1, 1 end
    return days_from_civil(y, m, 1) * DAY, days_from_civil(ny, nm, 1) * DAY
  end
  return 0, -1
end

local n = (#ARGV - 4) / 3
local keys, starts, resets, totals = {}, {}, {}, {}
for i = 1, n do
  local bucket = ARGV[4 + 3 * i - 2]
  local period = ARGV[4 + 3 * i - 1]
  local limit = tonumber(ARGV[4 + 3 * i])
  local start, reset = window(period)
  local key = prefix .. 'budget:' .. bucket .. ':' .. start
  local total = tonumber(redis.call('GET', key) or '0')
  if not dry and total + amount > limit then
    return {0, i, total, reset}
  end
  keys[i], starts[i], resets[i], totals[i] = key, start, reset, total
end
local out = {1}
for i = 1, n do
  local total = totals[i]
  if not dry then
    -- ARGV[2], the integer string, not the Lua number (which would format as 1e+14).
    total = redis.call('INCRBY', keys[i], ARGV[2])
    if resets[i] >= 0 then
      -- Relative to this script's clock (the server's or a test's): a day after the end.
      redis.call('PEXPIRE', keys[i], math.max(1, resets[i] + DAY - now))
    end
  end
  out[#out + 1] = starts[i]
  out[#out + 1] = total
end
return out
