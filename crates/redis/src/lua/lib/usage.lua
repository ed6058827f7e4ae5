-- lib/usage.lua: usage accounting helpers (MemoryPool: memory/usage.rs; rules: core usage.rs),
-- composed into report.lua, extract.lua and xend.lua.
--
-- usage-seen:<worker>   HASH client\tupstream -> instance\trequests\tfailures\tup\tdown\tat
-- usage-total:<client>  HASH upstream\tkind -> amount          (until a year unused)
-- usage-m:<client>      HASH minute\tupstream\tkind -> amount   (the last hour)
-- usage-h:<client>      HASH hour\tupstream\tkind -> amount     (the last day)
-- kinds: requests, failures, bytes_up, bytes_down, extracted
--
-- The buckets of a client live in one hash per period length, so the key count is fixed
-- per client; each hash drops its fields older than its horizon whenever it gains a field
-- (a new period, upstream or kind), so its size is bounded too.

local USAGE_MINUTE, USAGE_HOUR = 60000, 3600000
local USAGE_SEEN_TTL = 24 * USAGE_HOUR
-- Every key carries a TTL, so an abandoned pool frees itself: a client's totals go a year
-- after its last use.
local USAGE_TOTAL_TTL = 366 * 24 * USAGE_HOUR
local USAGE_KINDS = { 'requests', 'failures', 'bytes_up', 'bytes_down' }

-- Adds to the bucket hash `key` for `period` (kept `keep` periods of `length` ms). Old
-- periods are dropped when a field is created (the counter's first amount in this period
-- for this upstream and kind), so an add to an existing field costs one HINCRBY.
local function usage_bucket(key, period, keep, length, field, amount_text)
  local added = redis.call('HINCRBY', key, P.fmt(period) .. '\t' .. field, amount_text)
  if added == P.num(amount_text) then
    local first = period - keep + 1
    for _, name in ipairs(redis.call('HKEYS', key)) do
      local at = P.num(string.match(name, '^(%d+)\t'))
      if at and at < first then
        redis.call('HDEL', key, name)
      end
    end
  end
  P.touch_key(key, (period + keep + 1) * length)
end

-- Adds `amount` of `kind` for (client, upstream) to the totals and the current buckets.
function P.usage_add(client, upstream, kind, amount)
  if amount <= 0 then
    return
  end
  local field = upstream .. '\t' .. kind
  local amount_text = P.fmt(amount)
  local total_key = B .. 'usage-total:' .. client
  redis.call('HINCRBY', total_key, field, amount_text)
  P.touch_key(total_key, NOW + USAGE_TOTAL_TTL)
  usage_bucket(B .. 'usage-m:' .. client, math.floor(NOW / USAGE_MINUTE), 60, USAGE_MINUTE, field, amount_text)
  usage_bucket(B .. 'usage-h:' .. client, math.floor(NOW / USAGE_HOUR), 24, USAGE_HOUR, field, amount_text)
end

-- Counts `records` as extracted by `client`: one usage add per upstream, not per proxy.
function P.usage_extracted(client, records)
  local per_upstream, upstreams = {}, {}
  for _, r in ipairs(records) do
    if per_upstream[r[UP]] == nil then
      per_upstream[r[UP]] = 0
      upstreams[#upstreams + 1] = r[UP]
    end
    per_upstream[r[UP]] = per_upstream[r[UP]] + 1
  end
  for _, upstream in ipairs(upstreams) do
    P.usage_add(client, upstream, 'extracted', per_upstream[upstream])
  end
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
