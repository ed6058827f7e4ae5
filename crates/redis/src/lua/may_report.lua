-- may_report.lua: whether a client may report on a proxy (MemoryPool:
-- CooldownStore::may_report). Read only.
--
-- ARGV[4] client, ARGV[5] proxy id. Yes when the record is live and not EXTRACTED by
-- another client (`extracted-by`); a proxy the pool does not hold answers as one held by
-- another client does.
-- Reply: {'ok', 1 | 0}.

local function main()
  local client, id = ARGV[4], ARGV[5]
  local current = P.live_record(id)
  if not current then
    return { 'ok', 0 }
  end
  if current[ST] == 'X' and redis.call('HGET', B .. 'extracted-by', id) ~= client then
    return { 'ok', 0 }
  end
  return { 'ok', 1 }
end

return P.run(main)
