-- runtime_get.lua: the worker's live runtime, belonging to its live current session
-- (MemoryPool: WorkerRuntimeStore::runtime). Read only.
--
-- ARGV[4] worker. Reply: {'ok'} (none) | {'ok', received_at, expires_at, report JSON}.

local function main()
  local rt = P.live_runtime(ARGV[4])
  if not rt then
    return { 'ok' }
  end
  return { 'ok', rt[2], rt[3], rt[6] }
end

return P.run(main)
