-- assign.lua: leases an AVAILABLE, unowned proxy to a worker under a new epoch
-- (MemoryPool: OwnershipRepository::assign).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] lease ms.
-- Reply: {'ok', assignment, ticket} | {'not_found'} | {'conflict', kind}.
-- Work bound: constant plus cleanup.

local function main()
  P.remove_expired(CLEANUP)
  local id, worker, lease = ARGV[4], ARGV[5], P.num(ARGV[6])
  local r = P.live_record(id)
  if not r then
    return { 'not_found' }
  end
  -- A lapsed lease that nobody expired yet still blocks: expire releases it.
  if P.is_owned(id) then
    return { 'conflict', 'ownership' }
  end
  if not P.is_usable(r) then
    return { 'conflict', 'status' }
  end
  local epoch = redis.call('INCR', B .. 'epoch')
  local a = { worker, P.fmt(epoch), P.fmt(NOW), P.fmt(math.min(NOW + lease, P.num(r[USABLE]))), r[UP] }
  P.put_assignment(id, a, nil)
  -- Every lease takes a new epoch: the generation the gateways' tickets name. It stays
  -- after the lease ends, until the proxy leaves the pool's hands (lib/records.lua).
  redis.call('HSET', B .. 'lease-epoch', id, P.fmt(epoch))
  P.touch_key(B .. 'lease-epoch', P.num(r[HARD]))
  return { 'ok', table.concat(a, '\t'), '' }
end

return P.run(main)
