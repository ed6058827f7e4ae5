-- lib/counters.lua: the counters kept beside the records.
--
-- Owns: the snapshot version per worker (`snapshot-versions`, P.bump_snapshot), the change
-- journal per worker (`snapshot-journal:<w>`, its floor a field of `snapshot-versions`,
-- P.journal_change) and the `inventory` hash: per upstream the un-extracted count (field
-- "<u>"), the count per status (field "<u>:<code>") and the max_sessions sum of its unowned
-- candidates (field "<u>:slots"). Invariant: zero counters are deleted, so the hash stays
-- bounded.

-- Statuses counted against max_size.
local UNEXTRACTED = { F = true, C = true, A = true, S = true, U = true }

-- Snapshot versions (`snapshot-versions` HASH worker -> counter; the field '*feedback',
-- never a worker id, counts session feedback): every write that may change what a
-- worker's snapshot lists moves its counter, so a waiting long-poll reads the counters
-- (snapshot_version.lua) instead of the records. The hash lives as long as the epoch, so
-- a counter starts over only once every session it could describe has lapsed. A bump for
-- one proxy (`id`) also names it in the worker's journal.
function P.bump_snapshot(field, id)
  local value = redis.call('HINCRBY', B .. 'snapshot-versions', field, 1)
  -- Created by a call that wrote no pool state: at least a slack of life.
  P.touch_key(B .. 'snapshot-versions', NOW)
  if id then
    P.journal_change(field, id, value)
  end
end

-- The change journal (`snapshot-journal:<w>` ZSET proxy id -> the counter value of its
-- latest change), so snapshot_changes.lua re-reads only the proxies named since a version.
-- Its rules are the snapshot protocol's (proxypool_snapshot::journal, whose crate doc is
-- the glossary of these counters); MemoryPool keeps them with that code.
-- A proxy is kept once, so the journal holds at most SNAPSHOT_JOURNAL_CAP (generated from
-- proxypool_core's constant) distinct proxies: past it the lowest goes and the worker's
-- floor rises to its value (`snapshot-versions` field '*floor:<w>', never a worker id:
-- changes at or below it are forgotten). The floor lives in the counters' own hash, so the
-- two never lapse apart, and its presence says the worker had a journal: a journal that
-- lapsed by its TTL (nothing named for a slack) starts over forgetting everything before
-- its first new change, where a worker's first journal forgets nothing (MemoryPool never
-- loses one; the two stores answer alike).
function P.journal_floor_field(worker)
  return '*floor:' .. worker
end

function P.journal_change(worker, id, value)
  local key = B .. 'snapshot-journal:' .. worker
  if redis.call('ZADD', key, value, id) == 1 then
    local kept = redis.call('ZCARD', key)
    local versions, floor = B .. 'snapshot-versions', P.journal_floor_field(worker)
    if kept == 1 then
      -- A new journal: the worker's first (no floor yet, nothing named was forgotten) or
      -- one that lapsed (everything named before this change was).
      if redis.call('HSETNX', versions, floor, '0') == 0 then
        redis.call('HSET', versions, floor, P.fmt(value - 1))
      end
    elseif kept > SNAPSHOT_JOURNAL_CAP then
      local oldest = redis.call('ZPOPMIN', key)
      redis.call('HSET', versions, floor, oldest[2])
    end
  end
  -- At least a slack of life past the latest change it names (the counters' rule for a
  -- call that wrote no pool state); a journal that lapses is known by its floor, above.
  P.touch_key(key, NOW)
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
