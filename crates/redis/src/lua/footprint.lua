-- footprint.lua: counts of what the pool holds (MemoryPool: Maintenance::footprint).
-- Read only; the work is bounded by the number of distinct index keys in the registries.
--
-- Reply: {records, assignments, sessions, runtimes, results, index entries}.

local function main()
  local results = redis.call('ZCARD', B .. 'idem-expiry') + redis.call('ZCARD', B .. 'op-expiry')
  local entries = results + redis.call('HLEN', B .. 'inventory')
  for _, k in ipairs({ 'expiry', 'checks', 'candidates', 'owner-expiry' }) do
    entries = entries + redis.call('ZCARD', B .. k)
  end
  for _, member in ipairs(redis.call('ZRANGE', B .. 'candidates', 0, -1)) do
    entries = entries + redis.call('ZCARD', B .. 'cand:' .. P.registry_suffix(member))
  end
  for _, k in ipairs(redis.call('SMEMBERS', B .. 'keys')) do
    entries = entries + redis.call('ZCARD', B .. k)
  end
  return {
    redis.call('HLEN', B .. 'records'),
    redis.call('HLEN', B .. 'owners'),
    redis.call('HLEN', B .. 'worker-sessions'),
    redis.call('HLEN', B .. 'worker-runtime'),
    results,
    entries,
  }
end

return P.run(main)
