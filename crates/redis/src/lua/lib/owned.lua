-- lib/owned.lua: the ownership check renew, drain and ack share, and what a worker holds
-- of a proxy as its snapshot reads it (owned_by, draining_of, snapshot_changes).
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

-- The record of `id` when its assignment `a` serves: an unexpired, non-draining lease on a
-- live, usable record (MemoryPool: State::serving); nil otherwise.
function P.serving_record(id, a)
  if P.drain_ticket(id) or NOW >= P.num(a[A_LEASE]) then
    return nil
  end
  local r = P.live_record(id)
  if r and P.is_usable(r) then
    return r
  end
  return nil
end

-- The drain ticket of `id` when its assignment `a` drains with an unexpired lease
-- (MemoryPool: State::draining); nil otherwise.
function P.draining_ticket(id, a)
  if NOW >= P.num(a[A_LEASE]) then
    return nil
  end
  return P.drain_ticket(id)
end
