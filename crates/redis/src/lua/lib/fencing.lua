-- lib/fencing.lua: leader leases and the leader-term check of fenced calls.
--
-- Owns: P.live_lease, the read of `leases` the lease entry points share, and
-- P.term_is_live, which P.run asks before an entry point touches anything.
-- Invariant: a call carrying a term (ARGV[4], "<lease name>\t<holder>\t<token>") runs only
-- while that lease exists in `leases`, names that holder, carries the token and has not
-- lapsed at NOW.

-- The lease of `name` ("holder\ttoken\tacquired_at\texpires_at") split at tabs, and its
-- stored text, while it has not lapsed at NOW; nil otherwise.
function P.live_lease(name)
  local l, v = P.get_fields('leases', name, 4, 'lease')
  if l and NOW < P.num(l[4]) then
    return l, v
  end
  return nil
end

-- Whether the caller's term is the live one: the lease exists, names the fence's holder,
-- carries its token, and has not lapsed at NOW. Checked before the script touches anything.
function P.term_is_live()
  if FENCE == '' then
    return true
  end
  local f = P.split(FENCE, '\t')
  if #f ~= 3 then
    return false
  end
  local v = redis.call('HGET', B .. 'leases', f[1])
  if not v then
    return false
  end
  local l = P.split(v, '\t')
  return #l == 4 and l[1] == f[2] and l[2] == f[3] and NOW < P.num(l[4])
end
