-- ack_drain.lua: releases a draining proxy when both the caller's counts and the worker's
-- own live report say it is idle (MemoryPool: OwnershipRepository::acknowledge_drain).
--
-- ARGV[4] proxy id, ARGV[5] worker, ARGV[6] epoch, ARGV[7] active, ARGV[8] reserved.
-- Reply: {'ok'} | {'not_found'} | {'conflict', kind}. Work bound: one report decode.

local function main()
  remove_expired(CLEANUP)
  local id, worker = ARGV[4], ARGV[5]
  local a, failure = owned_assignment(id, worker, ARGV[6])
  if not a then
    return failure
  end
  if not drain_ticket(id) then
    return { 'conflict', 'status' }
  end
  local busy = false
  local rt = live_runtime(worker)
  if rt then
    busy = (num(busy_map(rt)[id]) or 0) > 0
  end
  if num(ARGV[7]) > 0 or num(ARGV[8]) > 0 or busy then
    return { 'conflict', 'not_drained' }
  end
  drop_assignment(id)
  return { 'ok' }
end

return run(main)
