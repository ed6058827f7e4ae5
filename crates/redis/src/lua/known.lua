-- known.lua: what an upsert over several groups must know before it splits a batch: the
-- upstream's un-extracted count in this group (what max_size counts) and which of the
-- batch's proxies this group holds a live record of (those are refreshed, not inserted).
-- Read only.
--
-- ARGV[4] upstream, ARGV[5..] proxy ids.
-- Reply: {'ok', un-extracted count, one '1' or '0' per id}.

local function main()
  local count = P.num(redis.call('HGET', B .. 'inventory', ARGV[4])) or 0
  local flags = {}
  for i = 5, #ARGV do
    flags[#flags + 1] = P.live_record(ARGV[i]) and '1' or '0'
  end
  return { 'ok', P.fmt(count), table.concat(flags) }
end

return P.run(main)
