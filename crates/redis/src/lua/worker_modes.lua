-- worker_modes.lua: every worker whose mode is not active
-- (MemoryPool: AdminStore::worker_modes).
--
-- Reply: {'ok', worker, "mode\tsince", ...} (unordered; the Rust side sorts).

local function main()
  local out = { 'ok' }
  local all = redis.call('HGETALL', B .. 'worker-modes')
  for i = 1, #all do
    out[#out + 1] = all[i]
  end
  return out
end

return P.run(main)
