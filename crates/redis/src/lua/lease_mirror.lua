-- lease_mirror.lua: a group's copy of a lease the home group holds, so a fenced call in
-- this group checks its term (lib/fencing.lua's P.term_is_live) in its own atomic step.
-- A copy only moves forward: it never takes an older token than it has, and a cleared
-- copy stays cleared for that token. Written after the home group's lease with the same
-- expiry, so a copy never outlives the lease it copies.
--
-- ARGV[4] name, ARGV[5] 'set' | 'clear', ARGV[6] the lease
-- ("holder\ttoken\tacquired_at\texpires_at").
-- Reply: {'ok'}.

local function main()
  local name, action = ARGV[4], ARGV[5]
  local lease = P.split(ARGV[6], '\t')
  local token = P.num(lease[2])
  local current = redis.call('HGET', B .. 'leases', name)
  local held = current and P.num(P.split(current, '\t')[2]) or 0
  if action == 'set' then
    if token >= held then
      redis.call('HSET', B .. 'leases', name, ARGV[6])
      P.touch(B .. 'leases', P.num(lease[4]))
    end
  elseif current and token == held then
    redis.call('HDEL', B .. 'leases', name)
  end
  return { 'ok' }
end

return P.run(main)
