-- lib/assignments.lua: which worker holds which proxy.
--
-- Owns: `owners` (proxy id -> the assignment's fields, A_WORKER ... generated from
-- src/codec/assignment.rs), `owner-expiry`, the per-worker `worker-owned:<w>` /
-- `worker-draining:<w>` and per-upstream `owned:<u>` indexes, `drain-tickets`, and the key
-- registry `keys` these dynamic names are entered in. Invariant: an assigned proxy is in
-- no candidate index, and every index above holds it exactly while `owners` does.

-- Index keys registered in this call (`registered`, reset by P.begin): the registry needs
-- each name once, not per record.

function P.register(k)
  if not registered[k] then
    registered[k] = true
    redis.call('SADD', B .. 'keys', k)
  end
end

function P.get_assignment(id)
  return (P.get_fields('owners', id, A_FIELDS, 'assignment'))
end

function P.drain_ticket(id)
  return redis.call('HGET', B .. 'drain-tickets', id) or nil
end

-- Removes an assignment with its lease and per-worker/upstream indexes; returns it and its
-- drain ticket (or nil). `keep_out` skips putting the proxy back into the candidate
-- indexes (the caller stores a new assignment right away).
function P.drop_assignment(id, keep_out)
  local a = P.get_assignment(id)
  if not a then
    return nil
  end
  local ticket = P.drain_ticket(id)
  P.bump_snapshot(a[A_WORKER], id)
  redis.call('HDEL', B .. 'owners', id)
  redis.call('ZREM', B .. 'owner-expiry', id)
  redis.call('ZREM', B .. 'worker-owned:' .. a[A_WORKER], id)
  redis.call('ZREM', B .. 'worker-draining:' .. a[A_WORKER], id)
  redis.call('ZREM', B .. 'owned:' .. a[A_UP], id)
  if ticket then
    redis.call('HDEL', B .. 'drain-tickets', id)
  end
  if not keep_out then
    P.reindex(id)
  end
  return a, ticket
end

-- Releases `id`'s assignment and appends what was released to a release answer `out`
-- (id, the assignment's fields, its drain ticket); nothing when it had none.
function P.release_into(out, id)
  local a, ticket = P.drop_assignment(id)
  if a then
    out[#out + 1] = id
    out[#out + 1] = table.concat(a, '\t')
    out[#out + 1] = ticket or ''
  end
end

-- Stores an assignment (`ticket` = drain epoch when draining) with its indexes.
function P.put_assignment(id, a, ticket)
  P.drop_assignment(id, true)
  local lease = P.num(a[A_LEASE])
  local per_worker = ticket and 'worker-draining:' or 'worker-owned:'
  P.bump_snapshot(a[A_WORKER], id)
  redis.call('HSET', B .. 'owners', id, table.concat(a, '\t'))
  redis.call('ZADD', B .. 'owner-expiry', a[A_LEASE], id)
  redis.call('ZADD', B .. per_worker .. a[A_WORKER], a[A_LEASE], id)
  redis.call('ZADD', B .. 'owned:' .. a[A_UP], a[A_LEASE], id)
  P.register(per_worker .. a[A_WORKER])
  P.register('owned:' .. a[A_UP])
  if ticket then
    redis.call('HSET', B .. 'drain-tickets', id, ticket)
    P.touch(B .. 'drain-tickets', lease)
  end
  for _, k in ipairs({ 'owners', 'owner-expiry', per_worker .. a[A_WORKER], 'owned:' .. a[A_UP] }) do
    P.touch(B .. k, lease)
  end
  P.reindex(id)
end
