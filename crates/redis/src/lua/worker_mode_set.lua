-- worker_mode_set.lua: sets a worker's mode; `active` forgets the record
-- (MemoryPool: AdminStore::set_worker_mode). With a call key (ARGV[7]), the first call
-- with the key acts and keeps its answer in `admin-calls` (with its end in
-- `admin-calls-end`); a later one with the same worker and mode gets that answer back
-- (MemoryPool: AdminStore::set_worker_mode_keyed).
--
-- ARGV[4] worker, ARGV[5] mode (active | cordoned | draining), ARGV[6] most records,
-- ARGV[7] "<client>\t<key>" or '', ARGV[8] how long the answer is held (ms),
-- ARGV[9] most answers held.
-- Reply: {'ok', mode, since, replayed ('1' | '0')} | {'too_many'} | {'too_many_calls'} |
-- {'conflict', 'digest'} (the key answered another worker or mode).

local function set_mode(worker, mode)
  local key = B .. 'worker-modes'
  if mode == 'active' then
    redis.call('HDEL', key, worker)
    return { 'ok', mode, P.fmt(NOW) }
  end
  local v = redis.call('HGET', key, worker)
  if v then
    local m = P.split(v, '\t')
    if m[1] == mode then
      return { 'ok', m[1], m[2] }
    end
  elseif redis.call('HLEN', key) >= P.num(ARGV[6]) then
    return { 'too_many' }
  end
  redis.call('HSET', key, worker, mode .. '\t' .. P.fmt(NOW))
  return { 'ok', mode, P.fmt(NOW) }
end

local function main()
  P.remove_expired(CLEANUP)
  local worker, mode, call = ARGV[4], ARGV[5], ARGV[7]
  if call == '' then
    local reply = set_mode(worker, mode)
    reply[4] = '0'
    return reply
  end
  local calls, ends = B .. 'admin-calls', B .. 'admin-calls-end'
  local over = redis.call('ZRANGEBYSCORE', ends, '-inf', NOW, 'LIMIT', 0, 64)
  for _, gone in ipairs(over) do
    redis.call('HDEL', calls, gone)
    redis.call('ZREM', ends, gone)
  end
  local held = redis.call('HGET', calls, call)
  if held then
    local h = P.split(held, '\t')
    if h[1] ~= worker or h[2] ~= mode then
      return { 'conflict', 'digest' }
    end
    return { 'ok', h[2], h[3], '1' }
  end
  if redis.call('HLEN', calls) >= P.num(ARGV[9]) then
    return { 'too_many_calls' }
  end
  local reply = set_mode(worker, mode)
  if reply[1] ~= 'ok' then
    return reply
  end
  local until_ms = NOW + P.num(ARGV[8])
  redis.call('HSET', calls, call, worker .. '\t' .. reply[2] .. '\t' .. reply[3])
  redis.call('ZADD', ends, until_ms, call)
  P.touch_key(calls, until_ms)
  P.touch_key(ends, until_ms)
  reply[4] = '0'
  return reply
end

return P.run(main)
