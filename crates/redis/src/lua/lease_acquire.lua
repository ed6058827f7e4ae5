-- lease_acquire.lua: takes a free or lapsed lease, or renews it for its holder
-- (MemoryPool: LeaseStore::try_acquire). Fencing tokens come from `lease-tokens`, which
-- keeps the last token per name after release and has no TTL, so tokens only grow; a new
-- token is also never below NOW (core's next_token), so a store that lost `lease-tokens`
-- does not issue a token again that a term before the loss held.
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
    local last = P.num(redis.call('HGET', B .. 'lease-tokens', name)) or 0
    local token = P.fmt(math.max(last + 1, NOW))
    redis.call('HSET', B .. 'lease-tokens', name, token)
    l = { holder, token, P.fmt(NOW), expires }
  end
  local v = table.concat(l, '\t')
  redis.call('HSET', B .. 'leases', name, v)
  P.touch(B .. 'leases', P.num(expires))
  return { 'ok', v }
end

return P.run(main)
