-- mark_end_recovery.lua: ends the recovery the mark carries, an operator's
-- acknowledgement (MemoryPool: StoreIdentity::end_recovery); the sweep then releases every
-- withheld record.
--
-- Reply: {'ok'}.

local function main()
  redis.call('HDEL', MARK, 'lost_at', 'hold')
  return { 'ok' }
end

return P.run(main)
