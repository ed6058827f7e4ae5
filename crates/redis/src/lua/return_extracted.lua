-- return_extracted.lua: a client gives back a proxy it holds from an extraction
-- (MemoryPool: CooldownStore::return_extracted).
--
-- ARGV[4] client, ARGV[5] proxy id. The proxy must be live, EXTRACTED and handed to that
-- client (`extracted-by`); it becomes SUSPECT, so the checker's due list takes it right
-- after the FETCHED ones. The stored extraction response stays as it was.
-- Reply: {'ok'} | {'not_found'}.

local function main()
  P.remove_expired(CLEANUP)
  local client, id = ARGV[4], ARGV[5]
  local current = P.live_record(id)
  if not current or current[ST] ~= 'X' or redis.call('HGET', B .. 'extracted-by', id) ~= client then
    return { 'not_found' }
  end
  local r = P.copy(current)
  r[ST] = 'S'
  -- put_record drops the extracting client once the record leaves EXTRACTED.
  P.put_record(id, r, current, false)
  return { 'ok' }
end

return P.run(main)
