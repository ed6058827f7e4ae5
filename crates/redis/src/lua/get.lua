-- get.lua: the unexpired assignment of a live proxy (MemoryPool: OwnershipRepository::get).
--
-- ARGV[4] proxy id. Reply: {'ok'} (none) or {'ok', assignment, ticket}. Read only.

local function main()
  local id = ARGV[4]
  if not P.live_record(id) then
    return { 'ok' }
  end
  local a = P.get_assignment(id)
  if a and NOW < P.num(a[A_LEASE]) then
    return { 'ok', table.concat(a, '\t'), P.drain_ticket(id) or '' }
  end
  return { 'ok' }
end

return P.run(main)
