-- lib/owned.lua: the ownership check renew, drain and ack share.
--
-- The live assignment of `id`, which must belong to `worker` at `epoch` (MemoryPool:
-- owned_assignment); returns (assignment) or (nil, error reply).

function P.owned_assignment(id, worker, epoch)
  local a = P.get_assignment(id)
  if not a or not P.live_record(id) then
    return nil, { 'not_found' }
  end
  if a[A_WORKER] ~= worker or a[A_EPOCH] ~= epoch then
    return nil, { 'conflict', 'ownership' }
  end
  if P.num(a[A_LEASE]) <= NOW then
    return nil, { 'conflict', 'lease_expired' }
  end
  return a
end
