-- expire.lua: releases at most `limit` lapsed leases, oldest first
-- (MemoryPool: OwnershipRepository::expire).
--
-- ARGV[4] limit. Reply: {'ok', id, assignment, ticket, id, assignment, ticket, ...}.

local function main()
  P.remove_expired(CLEANUP)
  local due = redis.call('ZRANGEBYSCORE', B .. 'owner-expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, ARGV[4])
  local out = { 'ok' }
  for _, id in ipairs(due) do
    P.release_into(out, id)
  end
  return out
end

return P.run(main)
