-- mark_install.lua: makes a mark the store's current incarnation (MemoryPool:
-- StoreIdentity::install_mark). The same identity only raises the generation; another
-- identity replaces the whole mark, and with it the keyspace every caller that expects it
-- uses (the adapter's base names the identity), so the new incarnation starts empty.
--
-- ARGV[4] identity, ARGV[5] generation, ARGV[6] lost_at ('' = no recovery), ARGV[7] hold.
-- Reply: {'ok', "identity\tgeneration\tlost_at\thold"} (the mark afterwards).

local function main()
  local identity, generation = ARGV[4], P.num(ARGV[5])
  local current = redis.call('HMGET', MARK, 'identity', 'generation')
  if current[1] == identity then
    if generation > (P.num(current[2]) or 0) then
      redis.call('HSET', MARK, 'generation', ARGV[5])
    end
  else
    redis.call('DEL', MARK)
    redis.call('HSET', MARK, 'identity', identity, 'generation', ARGV[5])
    if ARGV[6] ~= '' then
      redis.call('HSET', MARK, 'lost_at', ARGV[6], 'hold', ARGV[7])
    end
  end
  return { 'ok', P.mark_text() }
end

return P.run(main)
