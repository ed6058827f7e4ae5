-- snapshot_version.lua: the worker's snapshot version and the session feedback counter
-- (MemoryPool: WorkerRuntimeStore::snapshot_version; the counters in lib/counters.lua). Read only:
-- one HMGET, what a waiting snapshot long-poll pays per look.
--
-- ARGV[4] worker. Reply: {'ok', worker counter, feedback counter} (0 for one never moved).

local function main()
  local v = redis.call('HMGET', B .. 'snapshot-versions', ARGV[4], '*feedback')
  return { 'ok', v[1] or '0', v[2] or '0' }
end

return P.run(main)
