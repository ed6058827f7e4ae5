-- xundo.lua: gives back one group's part of an aborted extraction over several groups:
-- every proxy of the part still EXTRACTED by the client becomes AVAILABLE again (it was
-- before: only usable records are extracted, and nothing else of the record changed), and
-- the part is forgotten, so the claim's later attempts cannot replay it. Idempotent.
--
-- ARGV[4] the part's stored-response key, ARGV[5] client.
-- Reply: {'ok', given back}.

local function main()
  local key, client = ARGV[4], ARGV[5]
  local stored = redis.call('GET', B .. key)
  if not stored then
    return { 'ok', '0' }
  end
  local lines = P.split(stored, '\n')
  local given = 0
  for i = 2, #lines do
    local id = P.decode(lines[i], 'extracted record')[ID]
    local current = P.live_record(id)
    if current and current[ST] == 'X' and redis.call('HGET', B .. 'extracted-by', id) == client then
      local r = P.copy(current)
      r[ST] = 'A'
      -- put_record drops the extracting client once the record leaves EXTRACTED.
      P.put_record(id, r, current, false)
      given = given + 1
    end
  end
  redis.call('DEL', B .. key)
  redis.call('ZREM', B .. 'idem-expiry', key)
  return { 'ok', P.fmt(given) }
end

return P.run(main)
