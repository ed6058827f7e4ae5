-- session_close.lua: ends the worker's session (even a lapsed one) with its runtime and
-- issued snapshot; another session's id is fenced (MemoryPool: close_session).
--
-- ARGV[4] worker, ARGV[5] session id. Reply: {'ok'} | {'conflict', 'fenced'}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id = ARGV[4], ARGV[5]
  local s = P.get_session(worker)
  if not s then
    return { 'ok' }
  end
  if s[S_ID] ~= session_id then
    return { 'conflict', 'fenced' }
  end
  P.forget_session(worker)
  return { 'ok' }
end

return P.run(main)
