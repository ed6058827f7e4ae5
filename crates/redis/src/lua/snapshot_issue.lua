-- snapshot_issue.lua: records the snapshot just issued to the current session
-- (MemoryPool: WorkerRuntimeStore::issue_snapshot).
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] snapshot (canonical JSON).
-- Reply: {'ok'} | {'conflict', 'fenced'}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id = ARGV[4], ARGV[5]
  local s = P.current_session(worker, session_id)
  if not s then
    return { 'conflict', 'fenced' }
  end
  redis.call('HSET', B .. 'worker-snapshots', worker, session_id .. '\t' .. ARGV[6])
  P.save_session(worker, s)
  return { 'ok' }
end

return P.run(main)
