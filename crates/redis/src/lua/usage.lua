-- usage.lua: usage accounting helpers (MemoryPool: memory/usage.rs; rules: core usage.rs),
-- composed into report.lua and extract.lua.
--
-- usage-seen:<worker>        HASH client\tupstream -> instance\trequests\tfailures\tup\tdown
-- usage-total:<client>       HASH upstream\tkind -> amount   (since the store began)
-- usage-m:<client>:<minute>  HASH upstream\tkind -> amount   (kept an hour)
-- usage-h:<client>:<hour>    HASH upstream\tkind -> amount   (kept a day)
-- kinds: requests, failures, bytes_up, bytes_down, extracted

local USAGE_MINUTE, USAGE_HOUR = 60000, 3600000
local USAGE_SEEN_TTL = 24 * USAGE_HOUR
local USAGE_KINDS = { 'requests', 'failures', 'bytes_up', 'bytes_down' }

-- Adds `amount` of `kind` for (client, upstream) to the totals and the current buckets.
function P.usage_add(client, upstream, kind, amount)
  if amount <= 0 then
    return
  end
  local field = upstream .. '\t' .. kind
  local amount_text = P.fmt(amount)
  redis.call('HINCRBY', B .. 'usage-total:' .. client, field, amount_text)
  local minute = math.floor(NOW / USAGE_MINUTE)
  local minute_key = B .. 'usage-m:' .. client .. ':' .. P.fmt(minute)
  redis.call('HINCRBY', minute_key, field, amount_text)
  P.touch_key(minute_key, (minute + 61) * USAGE_MINUTE)
  local hour = math.floor(NOW / USAGE_HOUR)
  local hour_key = B .. 'usage-h:' .. client .. ':' .. P.fmt(hour)
  redis.call('HINCRBY', hour_key, field, amount_text)
  P.touch_key(hour_key, (hour + 25) * USAGE_HOUR)
end

-- Accounts a gateway's cumulative usage (core usage_delta): `text` is
-- "instance" followed by lines "client\tupstream\trequests\tfailures\tup\tdown".
function P.usage_record_gateway(worker, text)
  if text == '' then
    return
  end
  local lines = P.split(text, '\n')
  local instance = lines[1]
  local seen_key = B .. 'usage-seen:' .. worker
  for i = 2, #lines do
    local f = P.split(lines[i], '\t')
    local client, upstream = f[1], f[2]
    local pair = client .. '\t' .. upstream
    local now_counts = { P.num(f[3]), P.num(f[4]), P.num(f[5]), P.num(f[6]) }
    local previous = redis.call('HGET', seen_key, pair)
    local before = nil
    if previous then
      local p = P.split(previous, '\t')
      if p[1] == instance and NOW < P.num(p[6]) + USAGE_SEEN_TTL then
        before = { P.num(p[2]), P.num(p[3]), P.num(p[4]), P.num(p[5]) }
      end
    end
    for k = 1, 4 do
      local delta = now_counts[k]
      -- A counter that went down was reset: all of it is new.
      if before and now_counts[k] >= before[k] then
        delta = now_counts[k] - before[k]
      end
      P.usage_add(client, upstream, USAGE_KINDS[k], delta)
    end
    redis.call('HSET', seen_key, pair, table.concat({ instance, f[3], f[4], f[5], f[6], P.fmt(NOW) }, '\t'))
  end
  P.touch_key(seen_key, NOW + USAGE_SEEN_TTL)
end
