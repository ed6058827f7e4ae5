-- lease_acquire.lua: takes a free or lapsed lease, or renews it for its holder
-- (MemoryPool: LeaseStore::try_acquire). Fencing tokens come from `lease-tokens`, which
-- keeps the last token per name after release and has no TTL, so tokens only grow.
--
-- ARGV[4] name, ARGV[5] holder, ARGV[6] expires_at.
-- Reply: {'ok'} (held by someone else) | {'ok', lease} with lease
-- "holder\ttoken\tacquired_at\texpires_at".

local function main()
  local name, holder, expires = ARGV[4], ARGV[5], ARGV[6]
  local l = P.live_lease(name)
  if l and l[1] ~= holder then
    return { 'ok' }
  end
  if l then
    l[4] = expires
  else
    local token = redis.call('HINCRBY', B .. 'lease-tokens', name, 1)
    l = { holder, P.fmt(token), P.fmt(NOW), expires }
  end
  local v = table.concat(l, '\t')
  redis.call('HSET', B .. 'leases', name, v)
  P.touch(B .. 'leases', P.num(expires))
  return { 'ok', v }
end

return P.run(main)
