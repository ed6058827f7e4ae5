-- provider_status_put.lua: replaces one upstream's provider status (the leader's
-- reconciler writes it; MemoryPool: AdminStore::put_provider_status).
--
-- ARGV[4] upstream, ARGV[5] status (JSON), ARGV[6] most upstreams.
-- Reply: {'ok'} | {'too_many'}.

local function main()
  P.remove_expired(CLEANUP)
  local key = B .. 'provider-status'
  if redis.call('HEXISTS', key, ARGV[4]) == 0 and redis.call('HLEN', key) >= P.num(ARGV[6]) then
    return { 'too_many' }
  end
  redis.call('HSET', key, ARGV[4], ARGV[5])
  return { 'ok' }
end

return P.run(main)
