-- groups.lua: pins the number of shard groups the store's keys are spread over, beside the
-- mark and like it outside every incarnation: a process that spread proxies over another
-- number would look for each in the wrong group. The first caller's count stays.
--
-- ARGV[4] the caller's group count.
-- Reply: {'ok', the pinned count}.

local function main()
  local key = MARK .. ':groups'
  redis.call('SET', key, ARGV[4], 'NX')
  return { 'ok', redis.call('GET', key) }
end

return P.run(main)
