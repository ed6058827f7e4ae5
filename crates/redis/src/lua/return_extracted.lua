-- return_extracted.lua: a client gives back a proxy it holds from an extraction
-- (MemoryPool: CooldownStore::return_extracted, memory/generation.rs).
--
-- ARGV[4] client, ARGV[5] proxy id. The proxy must be live, EXTRACTED and held by that
-- client (`extracted-by`). It stays EXTRACTED, held by nobody (`given-back`): the client
-- may still hold its credentials, so nobody else is handed it (no extraction, no lease,
-- no check) until its hard expiry or until the vendor re-issues it (upsert.lua). A replay
-- or a read of the stored extraction then shows it returned, without credentials.
-- Reply: {'ok'} | {'not_found'}.

local function main()
  P.remove_expired(CLEANUP)
  local client, id = ARGV[4], ARGV[5]
  local current = P.live_record(id)
  if not current or current[ST] ~= 'X' or redis.call('HGET', B .. 'extracted-by', id) ~= client then
    return { 'not_found' }
  end
  redis.call('HDEL', B .. 'extracted-by', id)
  redis.call('HSET', B .. 'given-back', id, client)
  P.touch_key(B .. 'given-back', P.num(current[HARD]))
  return { 'ok' }
end

return P.run(main)
