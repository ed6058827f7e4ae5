-- cooldowns_of.lua: the remembered cooldowns of some proxies (MemoryPool:
-- CooldownStore::cooldowns_of). Read only: forgotten entries are left for the next
-- write or the sweep.
--
-- ARGV[4..] proxy ids. Reply: {'ok', id, line, id, line, ...}: one "domain\tuntil\tstrikes
-- \tforget_at\tproject" line per entry still remembered at NOW, by proxy in the given
-- order, each proxy's in (domain, project) order; proxies that are not live give nothing.

local function main()
  local out = { 'ok' }
  for i = 4, #ARGV do
    local id = ARGV[i]
    if redis.call('HEXISTS', B .. 'cooldowns', id) == 1 and P.live_record(id) then
      for _, e in ipairs(P.remembered_cooldowns(id)) do
        out[#out + 1] = id
        out[#out + 1] = P.encode_cooldown(e)
      end
    end
  end
  return out
end

return P.run(main)
