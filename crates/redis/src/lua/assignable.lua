-- assignable.lua: usable, unowned proxies, longest-lived first
-- (MemoryPool: OwnershipRepository::assignable). Read only.
--
-- ARGV[4] limit, ARGV[5] scan budget. Reply: {'ok', record...} | {'scan_budget'}.

local ANY = { [PROTO] = '', [UP] = '', [REGION] = '', [CARRIER] = '' }

local function main()
  local limit, budget = P.num(ARGV[4]), P.num(ARGV[5])
  local out = { 'ok' }
  local found, examined = 0, 0
  local next_id = P.candidate_stream(ANY, math.min(math.max(limit, 16), 512))
  while found < limit do
    local id = next_id()
    if id == nil then
      break
    end
    if examined == budget then
      return { 'scan_budget' }
    end
    examined = examined + 1
    local r = P.get_record(id)
    if r and NOW < P.num(r[HARD]) and P.is_usable(r) then
      out[#out + 1] = P.encode(r)
      found = found + 1
    end
  end
  return out
end

return P.run(main)
