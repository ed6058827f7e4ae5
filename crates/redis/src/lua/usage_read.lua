-- usage_read.lua: the usage of some clients (MemoryPool: UsageReader in memory/usage.rs).
--
-- ARGV[4..] client ids. Reply: one text per client, lines "T\tupstream\tkind\tamount"
-- (totals), "M\tminute\tupstream\tkind\tamount" (the last 60 minutes) and
-- "H\thour\tupstream\tkind\tamount" (the last 24 hours). Work bound: 85 hash reads per
-- client, each as large as the client's upstreams.

local function flat(out, prefix, values)
  for i = 1, #values, 2 do
    out[#out + 1] = prefix .. values[i] .. '\t' .. values[i + 1]
  end
end

local function main()
  local replies = {}
  local minute = math.floor(NOW / 60000)
  local hour = math.floor(NOW / 3600000)
  for i = 4, #ARGV do
    local client = ARGV[i]
    local out = {}
    flat(out, 'T\t', redis.call('HGETALL', B .. 'usage-total:' .. client))
    for m = math.max(0, minute - 59), minute do
      local key = B .. 'usage-m:' .. client .. ':' .. P.fmt(m)
      flat(out, 'M\t' .. P.fmt(m) .. '\t', redis.call('HGETALL', key))
    end
    for h = math.max(0, hour - 23), hour do
      local key = B .. 'usage-h:' .. client .. ':' .. P.fmt(h)
      flat(out, 'H\t' .. P.fmt(h) .. '\t', redis.call('HGETALL', key))
    end
    replies[#replies + 1] = table.concat(out, '\n')
  end
  return replies
end

return P.run(main)
