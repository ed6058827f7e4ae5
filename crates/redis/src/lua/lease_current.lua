-- lease_current.lua: the live lease of a name (MemoryPool: LeaseStore::current). Read only.
--
-- ARGV[4] name. Reply: {'ok'} | {'ok', lease}.

local function main()
  -- No live lease leaves v nil, and the reply {'ok'}.
  local _, v = P.live_lease(ARGV[4])
  return { 'ok', v }
end

return P.run(main)
