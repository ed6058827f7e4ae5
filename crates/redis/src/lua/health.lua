-- health.lua: applies a batch of check results (MemoryPool: memory/health.rs).
--
-- ARGV[4] unhealthy_after_failures, then triples from ARGV[5]: proxy id, checked_at,
-- outcome ('s<latency>' for a success, 'f<error kind>' for a failure).
-- Reply: {'ok', applied, ignored}. Work bound: the batch size (at most 10,000) plus cleanup.

local function main()
  P.remove_expired(CLEANUP)
  local unhealthy_after = P.num(ARGV[4])
  local applied, ignored = 0, 0
  for i = 5, #ARGV, 3 do
    local id, checked_at, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local current = P.live_record(id)
    local stale = current and current[CHECKED] ~= '' and P.num(current[CHECKED]) > P.num(checked_at)
    if not current or not ACCEPTS_HEALTH[current[ST]] or stale then
      ignored = ignored + 1
    else
      local r = P.copy(current)
      r[CHECKED] = checked_at
      local kind, detail = string.sub(outcome, 1, 1), string.sub(outcome, 2)
      if kind == 's' then
        r[SUCC], r[LAT], r[FAILS], r[ERR] = checked_at, detail, '0', ''
        r[ST] = 'A'
      else
        local failures = (P.num(r[FAILS]) or 0) + 1
        r[FAILS], r[ERR] = P.fmt(failures), detail
        -- proxypool_core::health::status_after for a failure.
        r[ST] = failures >= unhealthy_after and 'U' or 'S'
      end
      P.put_record(id, r, current)
      applied = applied + 1
    end
  end
  return { 'ok', applied, ignored }
end

return P.run(main)
