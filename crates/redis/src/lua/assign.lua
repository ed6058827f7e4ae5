-- assign.lua: leases an AVAILABLE, unowned proxy to a worker under a new epoch
-- (MemoryPool: OwnershipRepository::assign).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] lease ms.
-- Reply: {'ok', assignment, ticket} | {'not_found'} | {'conflict', kind}.
-- Work bound: constant plus cleanup.

local function main()
  remove_expired(CLEANUP)
  local id, worker, lease = ARGV[4], ARGV[5], num(ARGV[6])
  local r = live_record(id)
  if not r then
    return { 'not_found' }
  end
  -- A lapsed lease that nobody expired yet still blocks: expire releases it.
  if is_owned(id) then
    return { 'conflict', 'ownership' }
  end
  if not is_usable(r) then
    return { 'conflict', 'status' }
  end
  local epoch = redis.call('INCR', B .. 'epoch')
  local a = { worker, fmt(epoch), fmt(NOW), fmt(math.min(NOW + lease, num(r[USABLE]))), r[UP] }
  put_assignment(id, a, nil)
  return { 'ok', table.concat(a, '\t'), '' }
end

return run(main)
