-- inventory.lua: one upstream's inventory, exact or not at all (MemoryPool:
-- memory/inventory.rs). Read only.
--
-- Counts by status come from the inventory hash; records past their hard expiry that no
-- sweep removed yet are moved to EXPIRED by a bounded scan of the expiry index; available
-- slots scan only this upstream's unowned candidate index and its owned set.
-- ARGV[4] upstream, ARGV[5] scan budget.
-- Reply: {'ok', unextracted, managed, available_slots, "F=1,A=4,..."} | {'scan_budget'}.

local STATUSES = { 'F', 'C', 'A', 'S', 'U', 'X', 'E', 'R' }
local MANAGED = { F = true, C = true, A = true, S = true }

local function main()
  local upstream, budget = ARGV[4], P.num(ARGV[5])
  local fields = { upstream }
  for i, status in ipairs(STATUSES) do
    fields[i + 1] = upstream .. ':' .. status
  end
  local values = redis.call('HMGET', B .. 'inventory', unpack(fields))
  local by, total = {}, 0
  for i, status in ipairs(STATUSES) do
    by[status] = P.num(values[i + 1]) or 0
    total = total + by[status]
  end
  -- MemoryPool's bound: the number of records the upstream holds.
  if total > budget then
    return { 'scan_budget' }
  end

  local expired = redis.call('ZRANGEBYSCORE', B .. 'expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, budget + 1)
  if #expired > budget then
    return { 'scan_budget' }
  end
  for _, id in ipairs(expired) do
    local r = P.get_record(id)
    if r and r[UP] == upstream then
      by[r[ST]] = by[r[ST]] - 1
      by['E'] = by['E'] + 1
    end
  end

  local slots = 0
  local unowned = redis.call('ZRANGEBYSCORE', B .. 'upstream:' .. upstream, '(' .. P.fmt(NOW), '+inf')
  for _, id in ipairs(unowned) do
    local r = P.live_record(id)
    if r and P.is_usable(r) and not P.is_owned(id) then
      slots = slots + P.num(r[MAXS])
    end
  end
  local runtimes = {}
  for _, id in ipairs(redis.call('ZRANGE', B .. 'owned:' .. upstream, 0, -1)) do
    local r = P.live_record(id)
    local a = P.get_assignment(id)
    if r and a and P.is_usable(r) and not P.drain_ticket(id) and NOW < P.num(a[A_LEASE]) then
      local worker = a[A_WORKER]
      if runtimes[worker] == nil then
        local rt = P.live_runtime(worker)
        runtimes[worker] = rt and { epoch = rt[4], busy = P.busy_map(rt) } or false
      end
      local rt = runtimes[worker]
      -- Capacity is only known from a report made against a snapshot that already
      -- included this assignment; unknown capacity is zero free slots.
      if rt and P.ucmp(rt.epoch, a[A_EPOCH]) >= 0 then
        slots = slots + math.max(0, P.num(r[MAXS]) - (P.num(rt.busy[id]) or 0))
      end
    end
  end

  local managed, listed = 0, {}
  for _, status in ipairs(STATUSES) do
    if MANAGED[status] then
      managed = managed + by[status]
    end
    if by[status] > 0 then
      listed[#listed + 1] = status .. '=' .. P.fmt(by[status])
    end
  end
  return { 'ok', values[1] or '0', P.fmt(managed), P.fmt(slots), table.concat(listed, ',') }
end

return P.run(main)
