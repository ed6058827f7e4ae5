-- snapshot_ack.lua: the session applied the issued snapshot; repeating the last ack is
-- idempotent (MemoryPool: WorkerRuntimeStore::ack_snapshot).
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] snapshot (canonical JSON).
-- Reply: {'ok', session, ''} | {'conflict', 'fenced' | 'snapshot'}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id, snapshot = ARGV[4], ARGV[5], ARGV[6]
  local s = P.current_session(worker, session_id)
  if not s then
    return { 'conflict', 'fenced' }
  end
  local issued = P.issued_snapshot(worker, session_id)
  if s[S_ACKED] == snapshot and issued == '' then
    return { 'ok', table.concat(s, '\t'), '' }
  end
  if issued ~= snapshot then
    return { 'conflict', 'snapshot' }
  end
  s[S_ACKED] = issued
  P.forget_snapshot(worker)
  P.save_session(worker, s)
  return { 'ok', table.concat(s, '\t'), '' }
end

return P.run(main)
