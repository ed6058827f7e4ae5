-- known.lua: what an upsert over several groups must know before it splits a batch: the
-- upstream's un-extracted count in this group (what max_size counts) and which of the
-- batch's proxies this group holds a live record of that the upsert will not store anew
-- (those are refreshed or ignored, not inserted; a proxy given back that the vendor
-- re-issued is stored anew, a new generation, so it needs room like a new proxy).
-- Read only.
--
-- ARGV[4] upstream, ARGV[5..] the batch's encoded FETCHED records of this group.
-- Reply: {'ok', un-extracted count, one '1' or '0' per record}.

local function main()
  local count = P.num(redis.call('HGET', B .. 'inventory', ARGV[4])) or 0
  local flags = {}
  for i = 5, #ARGV do
    local fresh = P.decode(ARGV[i], 'candidate')
    local incumbent = P.live_record(fresh[ID])
    local kept = incumbent and not P.renews_given_back(incumbent, fresh)
    flags[#flags + 1] = kept and '1' or '0'
  end
  return { 'ok', P.fmt(count), table.concat(flags) }
end

return P.run(main)
