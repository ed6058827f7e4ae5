-- ticket_key.lua: the store's key of the gateways' feedback tickets, made on first use
-- (MemoryPool: TicketKeyStore::ticket_key).
--
-- ARGV[4] a fresh key (64 hex digits, from the caller's CSPRNG: Lua has none), stored only
-- when the store has no key yet (SET NX), so every caller racing on an empty store gets
-- the one stored first. Its native TTL is kept KEEP past its last read (every controller
-- reads it while it builds snapshots), so an abandoned incarnation's key lapses with it.
-- Reply: {'ok', key}.

local KEEP = 30 * 24 * 3600 * 1000

local function main()
  local name = B .. 'ticket-key'
  redis.call('SET', name, ARGV[4], 'NX')
  local key = redis.call('GET', name)
  P.touch_key(name, NOW + KEEP)
  return { 'ok', key }
end

return P.run(main)
