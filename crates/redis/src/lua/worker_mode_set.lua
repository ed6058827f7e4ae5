-- worker_mode_set.lua: sets a worker's mode; `active` forgets the record
-- (MemoryPool: AdminStore::set_worker_mode).
--
-- ARGV[4] worker, ARGV[5] mode (active | cordoned | draining), ARGV[6] most records.
-- Reply: {'ok', mode, since} | {'too_many'}.

local function main()
  P.remove_expired(CLEANUP)
  local worker, mode = ARGV[4], ARGV[5]
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

return P.run(main)
