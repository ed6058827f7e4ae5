-- usage_read.lua: the usage of some clients (MemoryPool: UsageReader in memory/usage.rs).
--
-- ARGV[4..] client ids. Reply: one text per client, lines "T\tupstream\tkind\tamount"
-- (totals), "M\tminute\tupstream\tkind\tamount" and "H\thour\tupstream\tkind\tamount"
-- (the bucket hashes as stored; the reader keeps the last 60 minutes and 24 hours). Work
-- bound: three hash reads per client, each bounded by usage.lua's pruning.

local function flat(out, prefix, values)
  for i = 1, #values, 2 do
    if values[i] ~= 'pruned' then
      out[#out + 1] = prefix .. values[i] .. '\t' .. values[i + 1]
    end
  end
end

local function main()
  local replies = {}
  for i = 4, #ARGV do
    local client = ARGV[i]
    local out = {}
    flat(out, 'T\t', redis.call('HGETALL', B .. 'usage-total:' .. client))
    flat(out, 'M\t', redis.call('HGETALL', B .. 'usage-m:' .. client))
    flat(out, 'H\t', redis.call('HGETALL', B .. 'usage-h:' .. client))
    replies[#replies + 1] = table.concat(out, '\n')
  end
  return replies
end

return P.run(main)
