-- session_open.lua: opens (or, with the same id, renews) a worker session; a different id
-- replaces and fences the current one and forgets its runtime and issued snapshot
-- (MemoryPool: WorkerRuntimeStore::open_session).
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] expires_at.
-- Reply: {'ok', session, issued snapshot or ''}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id = ARGV[4], ARGV[5]
  local s = P.current_session(worker, session_id)
  if s then
    s[S_EXPIRES] = ARGV[6]
    P.save_session(worker, s)
    return { 'ok', table.concat(s, '\t'), P.issued_snapshot(worker, session_id) }
  end
  P.forget_session(worker)
  s = { session_id, P.fmt(NOW), ARGV[6], '', '', '', '' }
  P.save_session(worker, s)
  return { 'ok', table.concat(s, '\t'), '' }
end

return P.run(main)
