-- inventory.lua: one upstream's inventory, exact or not at all (MemoryPool:
-- memory/inventory.rs). Read only.
--
-- Counts by status come from the inventory hash; records past their hard expiry that no
-- sweep removed yet are moved to EXPIRED by a bounded scan of the expiry index. Available
-- slots: the running sum over the unowned candidates, less those past usable_until, plus
-- what each owned proxy's fresh runtime leaves.
-- ARGV[4] upstream, ARGV[5] scan budget.
-- Reply: {'ok', unextracted, managed, available_slots, "F=1,A=4,..."} | {'scan_budget'}.

local STATUSES = { 'F', 'C', 'A', 'S', 'U', 'X', 'E', 'R' }
local MANAGED = { F = true, C = true, A = true, S = true }
-- The max_sessions field (MAXS) of a record.
local MAX_SESSIONS = '^' .. string.rep('[^\t]*\t', MAXS - 1) .. '([^\t]*)\t'

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
    local r = P.get_record(P.hex(id))
    if r and r[UP] == upstream then
      by[r[ST]] = by[r[ST]] - 1
      by['E'] = by['E'] + 1
    end
  end

  -- Unowned candidates: the running sum of their max_sessions, less the ones whose
  -- usable_until has passed (still indexed until they expire; inside the safety margin).
  local slots = P.num(redis.call('HGET', B .. 'inventory', upstream .. ':slots')) or 0
  -- The upstream's candidate indexes are the registry entries naming it (the registry
  -- holds one entry per filter combination, a small set next to the records).
  local stale = {}
  for _, member in ipairs(redis.call('ZRANGE', B .. 'candidates', 0, -1)) do
    local suffix = P.registry_suffix(member)
    if P.split(suffix, '/')[2] == upstream then
      local left = budget + 1 - #stale
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', B .. 'cand:' .. suffix, '-inf', P.fmt(NOW), 'LIMIT', 0, left)) do
        stale[#stale + 1] = id
      end
      if #stale > budget then
        return { 'scan_budget' }
      end
    end
  end
  for first = 1, #stale, 500 do
    local ids = { unpack(stale, first, math.min(first + 499, #stale)) }
    for _, v in ipairs(redis.call('HMGET', B .. 'records', unpack(ids))) do
      local max = v and string.match(v, MAX_SESSIONS)
      if not max then
        P.corrupt('record')
      end
      slots = slots - P.num(max)
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
