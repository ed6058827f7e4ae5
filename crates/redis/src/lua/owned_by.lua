-- owned_by.lua: proxies a worker serves: unexpired, non-draining leases on usable records
-- (MemoryPool: OwnershipRepository::owned_by). Read only; the adapter sorts by id and
-- applies the limit, as MemoryPool does.
--
-- ARGV[4] worker, ARGV[5] scan budget.
-- Reply: {'ok', id, record, assignment, ...} | {'scan_budget'}.

local function main()
  local worker, budget = ARGV[4], P.num(ARGV[5])
  local ids = P.live_members(B .. 'worker-owned:' .. worker, budget)
  if not ids then
    return { 'scan_budget' }
  end
  local out = { 'ok' }
  for _, id in ipairs(ids) do
    local a = P.get_assignment(id)
    local r = a and P.serving_record(id, a)
    if r then
      out[#out + 1] = id
      out[#out + 1] = P.encode(r)
      out[#out + 1] = table.concat(a, '\t')
    end
  end
  return out
end

return P.run(main)
