-- sweep.lua: bounded removal of expired state (MemoryPool: Maintenance::sweep).
--
-- At most `limit` of each kind per call: hard-expired records (with their indexes and
-- assignments), logically expired extraction responses and operation results (the keys and
-- their expiry entries), lapsed sessions (with runtime and issued snapshot), lapsed
-- runtimes and snapshots, forgotten cooldowns (of at most `limit` proxies), expired
-- session feedback, and registry entries of index keys that no longer exist; and it
-- releases withheld records whose hold ended (all of them once the mark carries no
-- recovery).
-- ARGV[4] limit.
-- Reply: {records, assignments, sessions, results, more_pending (0|1), released}.

-- Releases up to `limit` withheld records: (released, more waiting).
local function release_withheld(limit)
  local upto = P.recovery() and P.fmt(NOW) or '+inf'
  local due = redis.call('ZRANGEBYSCORE', B .. 'withheld', '-inf', upto, 'LIMIT', 0, limit + 1)
  local released = 0
  for i = 1, math.min(#due, limit) do
    local id = P.hex(due[i])
    local r = P.get_record(id)
    if r then
      local old = P.copy(r)
      r[WITHHELD] = ''
      P.put_record(id, r, old)
      released = released + 1
    else
      redis.call('ZREM', B .. 'withheld', due[i])
    end
  end
  return released, #due > limit
end

local function expire_results(zkey, limit)
  local due = redis.call('ZRANGEBYSCORE', B .. zkey, '-inf', P.fmt(NOW), 'LIMIT', 0, limit + 1)
  local removed = 0
  for i = 1, math.min(#due, limit) do
    redis.call('DEL', B .. due[i])
    redis.call('ZREM', B .. zkey, due[i])
    removed = removed + 1
  end
  return removed, #due > limit
end

local function main()
  local limit = P.num(ARGV[4])
  local records, assignments, more = P.remove_expired(limit)
  local extractions, more_extractions = expire_results('idem-expiry', limit)
  local operations, more_operations = expire_results('op-expiry', limit)
  local more_cooldowns = P.forget_cooldowns(limit)
  P.forget_expired_feedback(limit)
  local released, more_withheld = release_withheld(limit)

  local lapsed = redis.call('ZRANGEBYSCORE', B .. 'worker-session-expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, limit + 1)
  local sessions = 0
  for i = 1, math.min(#lapsed, limit) do
    P.forget_session(lapsed[i])
    sessions = sessions + 1
  end
  for _, worker in ipairs(redis.call('ZRANGEBYSCORE', B .. 'worker-runtime-expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, limit)) do
    P.forget_runtime(worker)
  end
  for _, worker in ipairs(redis.call('ZRANGEBYSCORE', B .. 'worker-snapshot-expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, limit)) do
    P.forget_snapshot(worker)
  end
  for _, k in ipairs(redis.call('SRANDMEMBER', B .. 'keys', limit)) do
    if redis.call('EXISTS', B .. k) == 0 then
      redis.call('SREM', B .. 'keys', k)
    end
  end
  -- Candidate indexes leave the registry when emptied; one whose key lapsed by its TTL
  -- alone (a clock jump) leaves here.
  for _, member in ipairs(redis.call('ZRANDMEMBER', B .. 'candidates', limit)) do
    local suffix = P.registry_suffix(member)
    if redis.call('EXISTS', B .. 'cand:' .. suffix) == 0 then
      redis.call('ZREM', B .. 'candidates', member)
      redis.call('HDEL', B .. 'candidate-heads', suffix)
    end
  end

  local pending = more or more_extractions or more_operations or more_cooldowns or more_withheld
    or #lapsed > limit
  return { records, assignments, sessions, extractions + operations, pending and 1 or 0, released }
end

return P.run(main)
