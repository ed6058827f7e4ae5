-- holding.lua: which of some proxies a client still holds from an extraction, so a replay
-- or a read of a stored extraction shows the ones it gave back without their credentials
-- (MemoryPool: State::holds). Read only.
--
-- ARGV[4] client, ARGV[5..] proxy ids.
-- Reply: {'ok', one '1' or '0' per id}: '1' when the record is live, EXTRACTED and
-- `extracted-by` the client.

local function main()
  local client = ARGV[4]
  local flags = {}
  for i = 5, #ARGV do
    local id = ARGV[i]
    local r = P.live_record(id)
    local held = r and r[ST] == 'X' and redis.call('HGET', B .. 'extracted-by', id) == client
    flags[#flags + 1] = held and '1' or '0'
  end
  return { 'ok', table.concat(flags) }
end

return P.run(main)
