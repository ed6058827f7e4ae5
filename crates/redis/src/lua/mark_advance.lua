-- mark_advance.lua: advances the store's generation by one, for a caller that remembers
-- this store (MemoryPool: StoreIdentity::advance_generation).
--
-- Reply: {'ok', generation}.

local function main()
  if not redis.call('HGET', MARK, 'identity') then
    return { 'store_lost', 'missing' }
  end
  return { 'ok', P.fmt(redis.call('HINCRBY', MARK, 'generation', 1)) }
end

return P.run(main)
