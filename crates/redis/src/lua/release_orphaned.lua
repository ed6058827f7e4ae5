-- release_orphaned.lua: releases at most `limit` assignments, serving or draining, of
-- workers without a live session (MemoryPool: OwnershipRepository::release_orphaned). The
-- workers holding assignments are found through the key registry (their
-- `worker-owned:<w>` / `worker-draining:<w>` indexes); each one's session is read in this
-- same script, so a session renewed concurrently keeps its proxies.
--
-- ARGV[4] limit. Reply: {'ok', id, assignment, ticket, id, assignment, ticket, ...}.
-- Work bound: the registry's size plus `limit` releases.

local PREFIXES = { 'worker-owned:', 'worker-draining:' }

-- Ids of the assignments of sessionless workers, sorted (MemoryPool's order).
local function orphaned_ids()
  local ids = {}
  for _, k in ipairs(redis.call('SMEMBERS', B .. 'keys')) do
    for _, prefix in ipairs(PREFIXES) do
      if string.sub(k, 1, #prefix) == prefix then
        local worker = string.sub(k, #prefix + 1)
        if not P.live_session(worker) then
          for _, id in ipairs(redis.call('ZRANGE', B .. k, 0, -1)) do
            ids[#ids + 1] = id
          end
        end
      end
    end
  end
  table.sort(ids)
  return ids
end

local function main()
  P.remove_expired(CLEANUP)
  local limit = P.num(ARGV[4])
  local out = { 'ok' }
  for _, id in ipairs(orphaned_ids()) do
    if (#out - 1) / 3 >= limit then
      break
    end
    P.release_into(out, id)
  end
  return out
end

return P.run(main)
