-- snapshot_changes.lua: the proxies whose place in a worker's snapshot may have changed
-- since its counter was at a version, each read as the worker holds it now, with the
-- counters (MemoryPool: WorkerRuntimeStore::snapshot_changes; the journal in
-- lib/counters.lua, the holding rules in lib/owned.lua). Read only.
--
-- ARGV[4] worker, ARGV[5] after (a value of the worker's counter), ARGV[6] the most
-- proxies to return (at most the journal's cap plus the asked ones), ARGV[7..] ids to read
-- besides the changed ones.
-- Reply: {'ok', worker counter, feedback counter, 'none'} when the journal forgot changes
-- after `after` or more than the limit would be returned, else {'ok', worker counter,
-- feedback counter, 'some', then per proxy (changed or asked, once, in no order): id,
-- 's', record, assignment (serving) | id, 'd', assignment, drain ticket (draining) |
-- id, 'n', '', '' (nothing)}. Work bound: the limit.

local function push(out, id, kind, a, b)
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = id, kind, a, b
end

-- Appends what `worker` holds of `id` to `out`.
local function holding(out, worker, id)
  local a = P.get_assignment(id)
  if a and a[A_WORKER] == worker then
    local r = P.serving_record(id, a)
    if r then
      return push(out, id, 's', P.encode(r), table.concat(a, '\t'))
    end
    local ticket = P.draining_ticket(id, a)
    if ticket then
      return push(out, id, 'd', table.concat(a, '\t'), ticket)
    end
  end
  push(out, id, 'n', '', '')
end

local function main()
  local worker, after, limit = ARGV[4], ARGV[5], P.num(ARGV[6])
  local key = B .. 'snapshot-journal:' .. worker
  local v = redis.call('HMGET', B .. 'snapshot-versions', worker, '*feedback', P.journal_floor_field(worker))
  local counter, floor = v[1] or '0', v[3]
  local out = { 'ok', counter, v[2] or '0' }
  if floor and redis.call('EXISTS', key) == 0 then
    -- The worker had a journal and it lapsed: every change up to now is forgotten.
    floor = counter
  end
  if floor and P.ucmp(after, floor) < 0 then
    out[#out + 1] = 'none'
    return out
  end
  local ids = redis.call('ZRANGEBYSCORE', key, '(' .. after, '+inf', 'LIMIT', 0, limit + 1)
  local seen = {}
  for _, id in ipairs(ids) do
    seen[id] = true
  end
  for i = 7, #ARGV do
    if not seen[ARGV[i]] then
      seen[ARGV[i]] = true
      ids[#ids + 1] = ARGV[i]
    end
  end
  if #ids > limit then
    out[#out + 1] = 'none'
    return out
  end
  out[#out + 1] = 'some'
  for _, id in ipairs(ids) do
    holding(out, worker, id)
  end
  return out
end

return P.run(main)
