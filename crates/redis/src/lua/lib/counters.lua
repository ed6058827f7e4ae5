-- lib/counters.lua: the counters kept beside the records.
--
-- Owns: the snapshot version per worker (`snapshot-versions`, P.bump_snapshot) and the
-- `inventory` hash: per upstream the un-extracted count (field "<u>"), the count per status
-- (field "<u>:<code>") and the max_sessions sum of its unowned candidates (field
-- "<u>:slots"). Invariant: zero counters are deleted, so the hash stays bounded.

-- Statuses counted against max_size.
local UNEXTRACTED = { F = true, C = true, A = true, S = true, U = true }

-- Snapshot versions (`snapshot-versions` HASH worker -> counter; the field '*feedback',
-- never a worker id, counts session feedback): every write that may change what a
-- worker's snapshot lists moves its counter, so a waiting long-poll reads the counters
-- (snapshot_version.lua) instead of the records. The hash lives as long as the epoch, so
-- a counter starts over only once every session it could describe has lapsed.
function P.bump_snapshot(field)
  redis.call('HINCRBY', B .. 'snapshot-versions', field, 1)
  -- Created by a call that wrote no pool state: at least a slack of life.
  P.touch_key(B .. 'snapshot-versions', NOW)
end

-- Counters that reach zero are deleted so the inventory hash stays bounded.
function P.hincr(key, field, delta)
  local value = redis.call('HINCRBY', key, field, delta)
  if value <= 0 then
    redis.call('HDEL', key, field)
  end
  return value
end

-- Moves `r`'s counters by `delta`. `extend`: the record's lifetime is new or grows. A
-- counter that was just created may have recreated the hash (it is deleted when empty),
-- so that extends the TTL too.
function P.count(r, delta, extend)
  local key = B .. 'inventory'
  local created = false
  if UNEXTRACTED[r[ST]] then
    created = P.hincr(key, r[UP], delta) == delta
  end
  created = P.hincr(key, r[UP] .. ':' .. r[ST], delta) == delta or created
  if extend or (delta > 0 and created) then
    P.touch(key, P.num(r[HARD]))
  end
end

-- Counters for `old` becoming `r`: only what changed (same upstream, same status and
-- same un-extracted state cancel out).
function P.recount(old, r, extend)
  if old[UP] ~= r[UP] then
    P.count(old, -1, false)
    P.count(r, 1, extend)
    return
  end
  local key = B .. 'inventory'
  local created = false
  local was, is = UNEXTRACTED[old[ST]] or false, UNEXTRACTED[r[ST]] or false
  if is and not was then
    created = P.hincr(key, r[UP], 1) == 1
  elseif was and not is then
    P.hincr(key, r[UP], -1)
  end
  if old[ST] ~= r[ST] then
    P.hincr(key, old[UP] .. ':' .. old[ST], -1)
    created = P.hincr(key, r[UP] .. ':' .. r[ST], 1) == 1 or created
  end
  if extend or created then
    P.touch(key, P.num(r[HARD]))
  end
end

-- The upstream's unowned candidates also keep a running sum of their max_sessions
-- (inventory field "<u>:slots"), so an inventory read need not visit every candidate.
function P.slots(r, delta)
  if delta ~= 0 then
    local key = B .. 'inventory'
    if P.hincr(key, r[UP] .. ':slots', delta) == delta and delta > 0 then
      P.touch(key, P.num(r[HARD]))
    end
  end
end
