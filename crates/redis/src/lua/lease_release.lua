-- lease_release.lua: gives a live lease up early, only for its holder with its token
-- (MemoryPool: LeaseStore::release).
--
-- ARGV[4] name, ARGV[5] holder, ARGV[6] token. Reply: {'ok'}.

local function main()
  local name = ARGV[4]
  local l = P.live_lease(name)
  if l and l[1] == ARGV[5] and l[2] == ARGV[6] then
    redis.call('HDEL', B .. 'leases', name)
  end
  return { 'ok' }
end

return P.run(main)
