-- session_open.lua: opens (or, with the same id, renews) a worker session; a different id
-- replaces and fences the current one and forgets its runtime and issued snapshot
-- (MemoryPool: WorkerRuntimeStore::open_session).
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] expires_at.
-- Reply: {'ok', session, issued snapshot or ''}.

local function main()
  remove_expired(CLEANUP)
  local worker, session_id = ARGV[4], ARGV[5]
  local s = current_session(worker, session_id)
  if s then
    s[S_EXPIRES] = ARGV[6]
    save_session(worker, s)
    return { 'ok', table.concat(s, '\t'), issued_snapshot(worker, session_id) }
  end
  forget_session(worker)
  s = { session_id, fmt(NOW), ARGV[6], '', '', '' }
  save_session(worker, s)
  return { 'ok', table.concat(s, '\t'), '' }
end

return run(main)
