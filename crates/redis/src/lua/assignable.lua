-- assignable.lua: usable, unowned proxies, longest-lived first
-- (MemoryPool: OwnershipRepository::assignable). Read only.
--
-- ARGV[4] limit, ARGV[5] scan budget. Reply: {'ok', record...} | {'scan_budget'}.

local function main()
  local limit, budget = P.num(ARGV[4]), P.num(ARGV[5])
  local out = { 'ok' }
  local found, examined, offset, page = 0, 0, 0, math.min(math.max(limit, 16), 512)
  while found < limit do
    local ids = redis.call('ZREVRANGEBYSCORE', B .. 'available', '+inf', '(' .. P.fmt(NOW), 'LIMIT', offset, page)
    for _, id in ipairs(ids) do
      if examined == budget then
        return { 'scan_budget' }
      end
      examined = examined + 1
      local v = redis.call('HGET', B .. 'records', id)
      if v then
        local r = P.decode(v)
        if NOW < P.num(r[HARD]) and P.is_usable(r) then
          out[#out + 1] = v
          found = found + 1
          if found == limit then
            break
          end
        end
      end
    end
    if #ids < page then
      break
    end
    offset = offset + #ids
  end
  return out
end

return P.run(main)
