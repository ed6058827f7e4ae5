-- renew.lua: extends a lease; worker and epoch must match, the lease is cut at
-- usable_until (MemoryPool: OwnershipRepository::renew).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] epoch, ARGV[7] lease ms.
-- Reply: {'ok', assignment, ticket} | {'not_found'} | {'conflict', kind}.

local function main()
  P.remove_expired(CLEANUP)
  local id = ARGV[4]
  local a, failure = P.owned_assignment(id, ARGV[5], ARGV[6])
  if not a then
    return failure
  end
  local r = P.live_record(id)
  local lease_until = math.min(NOW + P.num(ARGV[7]), P.num(r[USABLE]))
  if lease_until <= NOW then
    return { 'conflict', 'lease_expired' }
  end
  local ticket = P.drain_ticket(id)
  a[A_LEASE] = P.fmt(lease_until)
  P.put_assignment(id, a, ticket)
  return { 'ok', table.concat(a, '\t'), ticket or '' }
end

return P.run(main)
