-- session_get.lua: the worker's live session (MemoryPool: WorkerRuntimeStore::session).
-- Read only.
--
-- ARGV[4] worker. Reply: {'ok'} (none) | {'ok', session, issued snapshot or ''}.

local function main()
  local worker = ARGV[4]
  local s = P.live_session(worker)
  if not s then
    return { 'ok' }
  end
  return { 'ok', table.concat(s, '\t'), P.issued_snapshot(worker, s[S_ID]) }
end

return P.run(main)
