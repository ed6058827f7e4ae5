-- proxies.lua: one page of the operators' listing (MemoryPool: memory/listing.rs).
-- Read only.
--
-- Bounded like an inventory read: a pool holding more records than the scan budget
-- answers 'scan_budget' rather than a partial page. Ids sort bytewise, as Rust's do.
-- ARGV[4] cursor ('' = from the start), ARGV[5] upstream ('' = any), ARGV[6] status code
-- ('' = any; 'E' also matches a record past its hard expiry), ARGV[7] limit,
-- ARGV[8] scan budget.
-- Reply: {'ok', more (0|1), id, record, assignment or '', drain ticket or '',
--         extracting client or '', ...}
--        | {'scan_budget'}.

local function main()
  local after, upstream, status = ARGV[4], ARGV[5], ARGV[6]
  local limit, budget = P.num(ARGV[7]), P.num(ARGV[8])
  if redis.call('HLEN', B .. 'records') > budget then
    return { 'scan_budget' }
  end
  local ids = redis.call('HKEYS', B .. 'records')
  for i, bin in ipairs(ids) do
    ids[i] = P.hex(bin)
  end
  table.sort(ids)
  local out, taken, more = { 'ok', 0 }, 0, 0
  for _, id in ipairs(ids) do
    if after == '' or id > after then
      local r = P.get_record(id)
      local st = r[ST]
      if NOW >= P.num(r[HARD]) then
        st = 'E'
      end
      if (upstream == '' or r[UP] == upstream) and (status == '' or st == status) then
        if taken == limit then
          more = 1
          break
        end
        taken = taken + 1
        out[#out + 1] = id
        out[#out + 1] = P.encode(r)
        out[#out + 1] = redis.call('HGET', B .. 'owners', id) or ''
        out[#out + 1] = P.drain_ticket(id) or ''
        out[#out + 1] = redis.call('HGET', B .. 'extracted-by', id) or ''
      end
    end
  end
  out[2] = more
  return out
end

return P.run(main)
