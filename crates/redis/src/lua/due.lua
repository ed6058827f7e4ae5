-- due.lua: records to check next, in MemoryPool's order (read only).
--
-- The checks index scores FETCHED by fetched_at, SUSPECT by 2^45 + checked_at and
-- AVAILABLE/UNHEALTHY by 2^46 + checked_at, so one ascending range (score, id) is exactly
-- "FETCHED oldest first, then SUSPECT, then stale re-checks, ties by id".
-- ARGV[4] limit, ARGV[5] recheck_after_ms, ARGV[6] scan budget.
-- Reply: {'ok', record...} or {'scan_budget'} when the budget ran out before a decision.

local function main()
  local limit, recheck, budget = P.num(ARGV[4]), P.num(ARGV[5]), P.num(ARGV[6])
  local upper
  if NOW >= recheck then
    upper = P.fmt(2 * CLASS + NOW - recheck)
  else
    upper = '(' .. P.fmt(2 * CLASS)
  end
  local out = { 'ok' }
  local found, examined, offset, page = 0, 0, 0, math.min(math.max(limit, 16), 512)
  while found < limit do
    local ids = redis.call('ZRANGEBYSCORE', B .. 'checks', '-inf', upper, 'LIMIT', offset, page)
    for _, id in ipairs(ids) do
      if examined == budget then
        return { 'scan_budget' }
      end
      examined = examined + 1
      local v = redis.call('HGET', B .. 'records', id)
      if v then
        local r = P.decode_stored(v, P.hex(id))
        if NOW < P.num(r[HARD]) then
          out[#out + 1] = P.encode(r)
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
