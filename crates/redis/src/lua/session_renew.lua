-- session_renew.lua: extends the current session; a replaced one is fenced
-- (MemoryPool: WorkerRuntimeStore::renew_session).
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] expires_at.
-- Reply: {'ok', session, issued snapshot or ''} | {'conflict', 'fenced'}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id = ARGV[4], ARGV[5]
  local s = P.current_session(worker, session_id)
  if not s then
    return { 'conflict', 'fenced' }
  end
  s[S_EXPIRES] = ARGV[6]
  P.save_session(worker, s)
  return { 'ok', table.concat(s, '\t'), P.issued_snapshot(worker, session_id) }
end

return P.run(main)
