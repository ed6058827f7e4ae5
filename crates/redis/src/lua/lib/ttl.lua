-- lib/ttl.lua: native key TTLs, a memory safety net behind the logical expiries.
--
-- Owns: the per-call horizon of every key the call wrote (P.touch_key / P.touch) and its
-- flush at the end of the call (P.flush_ttls, run by P.run). Invariant: a key lives
-- between one and two slacks past the latest logical expiry it holds, and the epoch, the
-- key registry and the snapshot versions outlive every piece of pool state.

-- Native TTLs: remember per key the latest logical expiry written, extend once at the end.
-- `anchor` is the latest expiry of pool state (records, leases, sessions): the epoch and
-- the key registry must outlive it; stored results (idempotency, operations) do not count.
function P.touch_key(key, at)
  local current = horizon[key]
  if current == nil or at > current then
    horizon[key] = at
  end
end

function P.touch(key, at)
  P.touch_key(key, at)
  if anchor == nil or at > anchor then
    anchor = at
  end
end

-- One PTTL per key, and a PEXPIRE only when the key would die too early. An extension
-- adds one more slack on top, so a key whose horizon moves with time (usage, idempotency)
-- is extended about once per slack rather than on every call, and a key whose horizon is
-- already covered (the common case) costs a single read. A key lives between one and two
-- slacks past the latest logical expiry it holds.
function P.keep(key, at)
  local need = at - NOW + SLACK
  local left = redis.call('PTTL', key)
  if left == -2 or left >= need then
    return
  end
  redis.call('PEXPIRE', key, P.fmt(math.max(1, need + SLACK)))
end

function P.flush_ttls()
  for key, at in pairs(horizon) do
    P.keep(key, at)
  end
  if anchor ~= nil then
    -- The epoch, the key registry and the snapshot versions live as long as anything that
    -- refers to them.
    P.keep(B .. 'epoch', anchor)
    P.keep(B .. 'keys', anchor)
    P.keep(B .. 'snapshot-versions', anchor)
  end
end
