-- draining_of.lua: a worker's draining assignments with an unexpired lease
-- (MemoryPool: OwnershipRepository::draining_of). Read only; the adapter sorts by id and
-- applies the limit.
--
-- ARGV[4] worker, ARGV[5] scan budget.
-- Reply: {'ok', id, assignment, ticket, ...} | {'scan_budget'}.

local function main()
  local worker, budget = ARGV[4], P.num(ARGV[5])
  local ids = P.live_members(B .. 'worker-draining:' .. worker, budget)
  if not ids then
    return { 'scan_budget' }
  end
  local out = { 'ok' }
  for _, id in ipairs(ids) do
    local a = P.get_assignment(id)
    local ticket = a and P.draining_ticket(id, a)
    if ticket then
      out[#out + 1] = id
      out[#out + 1] = table.concat(a, '\t')
      out[#out + 1] = ticket
    end
  end
  return out
end

return P.run(main)
