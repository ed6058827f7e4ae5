-- ack_drain.lua: releases a draining proxy when both the caller's counts and the worker's
-- own live report say it is idle (MemoryPool: OwnershipRepository::acknowledge_drain).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] epoch, ARGV[7] active, ARGV[8] reserved.
-- Reply: {'ok'} | {'not_found'} | {'conflict', kind}. Work bound: one report decode.

local function main()
  P.remove_expired(CLEANUP)
  local id, worker = ARGV[4], ARGV[5]
  local a, failure = P.owned_assignment(id, worker, ARGV[6])
  if not a then
    return failure
  end
  if not P.drain_ticket(id) then
    return { 'conflict', 'status' }
  end
  local busy = false
  local rt = P.live_runtime(worker)
  if rt then
    busy = (P.num(P.busy_map(rt)[id]) or 0) > 0
  end
  if P.num(ARGV[7]) > 0 or P.num(ARGV[8]) > 0 or busy then
    return { 'conflict', 'not_drained' }
  end
  P.drop_assignment(id)
  return { 'ok' }
end

return P.run(main)
