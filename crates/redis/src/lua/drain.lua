-- drain.lua: starts draining a proxy off its worker; idempotent, the first call bumps the
-- global epoch and moves the proxy from worker-owned to worker-draining
-- (MemoryPool: OwnershipRepository::begin_drain).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] epoch.
-- Reply: {'ok', assignment, ticket} | {'not_found'} | {'conflict', kind}.

local function main()
  P.remove_expired(CLEANUP)
  local id = ARGV[4]
  local a, failure = P.owned_assignment(id, ARGV[5], ARGV[6])
  if not a then
    return failure
  end
  local ticket = P.drain_ticket(id)
  if ticket then
    return { 'ok', table.concat(a, '\t'), ticket }
  end
  ticket = P.fmt(redis.call('INCR', B .. 'epoch'))
  P.put_assignment(id, a, ticket)
  return { 'ok', table.concat(a, '\t'), ticket }
end

return P.run(main)
