-- sessions_live.lua: every live session (MemoryPool: live_sessions); the adapter sorts by
-- worker and applies the limit. Read only.
--
-- ARGV[4] scan budget.
-- Reply: {'ok', worker, session, issued snapshot, ...} | {'scan_budget'}.

local function main()
  local budget = P.num(ARGV[4])
  local workers = P.live_members(B .. 'worker-session-expiry', budget)
  if not workers then
    return { 'scan_budget' }
  end
  local out = { 'ok' }
  for _, worker in ipairs(workers) do
    local s = P.live_session(worker)
    if s then
      out[#out + 1] = worker
      out[#out + 1] = table.concat(s, '\t')
      out[#out + 1] = P.issued_snapshot(worker, s[S_ID])
    end
  end
  return out
end

return P.run(main)
