-- provider_statuses.lua: every stored provider status
-- (MemoryPool: AdminStore::provider_statuses).
--
-- Reply: {'ok', status, ...} (unordered; the Rust side sorts).

local function main()
  local out = { 'ok' }
  for _, v in ipairs(redis.call('HVALS', B .. 'provider-status')) do
    out[#out + 1] = v
  end
  return out
end

return P.run(main)
