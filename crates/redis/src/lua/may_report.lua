-- may_report.lua: who a client is to a proxy it reports on (MemoryPool:
-- CooldownStore::may_report). Read only.
--
-- ARGV[4] client, ARGV[5] proxy id. 'holder' when the record is live, EXTRACTED and
-- `extracted-by` this client; 'unheld' when it is live and not EXTRACTED, with the epoch
-- of its latest lease since it last entered the pool ('' = none: no ticket is good for
-- it); 'no' otherwise: a proxy the pool does not hold answers as one held by another
-- client, or given back, does.
-- Reply: {'ok', 'holder' | 'no'} | {'ok', 'unheld', lease epoch or ''}.

local function main()
  local client, id = ARGV[4], ARGV[5]
  local current = P.live_record(id)
  if not current then
    return { 'ok', 'no' }
  end
  if current[ST] ~= 'X' then
    return { 'ok', 'unheld', redis.call('HGET', B .. 'lease-epoch', id) or '' }
  end
  if redis.call('HGET', B .. 'extracted-by', id) == client then
    return { 'ok', 'holder' }
  end
  return { 'ok', 'no' }
end

return P.run(main)
