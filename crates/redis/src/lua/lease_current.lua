-- lease_current.lua: the live lease of a name (MemoryPool: LeaseStore::current). Read only.
--
-- ARGV[4] name. Reply: {'ok'} | {'ok', lease}.

local function main()
  local v = redis.call('HGET', B .. 'leases', ARGV[4])
  if v then
    local l = P.split(v, '\t')
    if #l ~= 4 then
      P.corrupt('lease')
    end
    if NOW < P.num(l[4]) then
      return { 'ok', v }
    end
  end
  return { 'ok' }
end

return P.run(main)
