-- raise.lua: raises one of this group's counters to at least a value another group's
-- counter reached, so the groups' counters read as one: after a reader raised every group
-- to the highest value it read, any later change in any group counts above it.
-- Counters: the ownership epoch ('epoch'), a worker's snapshot counter ('snapshot').
--
-- ARGV[4] 'epoch' | 'snapshot', ARGV[5] worker ('' for the epoch), ARGV[6] the value.
-- Reply: {'ok', the counter afterwards}.

local function main()
  local which, worker, value = ARGV[4], ARGV[5], P.num(ARGV[6])
  local current
  if which == 'epoch' then
    current = P.num(redis.call('GET', B .. 'epoch')) or 0
    if current < value then
      redis.call('SET', B .. 'epoch', P.fmt(value))
      P.touch(B .. 'epoch', NOW)
      current = value
    end
  else
    current = P.num(redis.call('HGET', B .. 'snapshot-versions', worker)) or 0
    if current < value then
      redis.call('HSET', B .. 'snapshot-versions', worker, P.fmt(value))
      P.touch_key(B .. 'snapshot-versions', NOW)
      current = value
    end
  end
  return { 'ok', P.fmt(current) }
end

return P.run(main)
