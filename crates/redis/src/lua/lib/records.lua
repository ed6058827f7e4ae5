-- lib/records.lua: storing and removing proxy records with everything that follows them.
--
-- Owns: `records`, `expiry`, `checks`, `extracted-by`, `given-back` and `lease-epoch`, and
-- P.put_record / P.remove_record, which keep every index and counter in step with a record.
-- Owns also `withheld` (bin id -> withheld until: the records a recovery withholds, which
-- the sweep releases).
-- Invariants (kept by put_record / remove_record / put_assignment / drop_assignment):
-- * a record is in its candidate index exactly when it is AVAILABLE, not withheld and
--   unowned (candidates.lua);
-- * `withheld` holds exactly the records whose WITHHELD field is set;
-- * `expiry` holds every record, `checks` every FETCHED/SUSPECT/AVAILABLE/UNHEALTHY one;
-- * `inventory` holds per upstream the un-extracted P.count(field "<u>") and the count per
--   status (field "<u>:<code>") (counters.lua);
-- * a record's cooldowns go with it (cooldowns.lua);
-- * `extracted-by` and `given-back` name only EXTRACTED records (the client holding it; the
--   client that gave it back), `lease-epoch` (the epoch of its latest lease since it last
--   entered the pool, what tickets are bound to) only records that are not EXTRACTED
--   (MemoryPool: memory/generation.rs).

-- Statuses health checks may change.
local ACCEPTS_HEALTH = { F = true, C = true, A = true, S = true, U = true }

-- checks score = class * 2^45 + since: (score, id) order is MemoryPool's due order.
local CLASS = 35184372088832

function P.check_score(r)
  local s = r[ST]
  if s == 'F' then
    return P.num(r[FETCHED])
  elseif s == 'S' then
    return CLASS + (P.num(r[CHECKED]) or 0)
  elseif s == 'A' or s == 'U' then
    return 2 * CLASS + (P.num(r[CHECKED]) or 0)
  end
  return nil
end

-- Record fields a snapshot neither carries nor decides on: the health bookkeeping the
-- checker rewrites on every check of a proxy that stays AVAILABLE, and the fetch time.
local HEALTH_ONLY = { [SUCC] = true, [CHECKED] = true, [LAT] = true, [FAILS] = true, [ERR] = true, [FETCHED] = true }

-- Moves the snapshot version of the worker holding `id` when `r` changes what a snapshot
-- listing it would say (MemoryPool: differs_for_snapshot). `owned` false: the caller knows
-- no worker holds it.
function P.bump_owner_if_listed_changed(id, old, r, owned)
  if owned == false then
    return
  end
  for i = 1, NFIELDS do
    if not HEALTH_ONLY[i] and old[i] ~= r[i] then
      local a = P.get_assignment(id)
      if a then
        P.bump_snapshot(a[A_WORKER], id)
      end
      return
    end
  end
end

function P.is_owned(id)
  return redis.call('HEXISTS', B .. 'owners', id) == 1
end

-- The record (and its stored text, for a caller that changes only what it can patch).
function P.get_record(id)
  local v = redis.call('HGET', B .. 'records', P.bin(id))
  if not v then
    return nil
  end
  return P.decode_stored(v, id), v
end

-- A record that exists and has not reached its hard expiry.
function P.live_record(id)
  local r = P.get_record(id)
  if r and NOW < P.num(r[HARD]) then
    return r
  end
  return nil
end

function P.is_usable(r)
  return r[ST] == 'A' and r[WITHHELD] == '' and NOW < P.num(r[USABLE])
end

-- Whether a record belongs in a candidate index, ownership aside.
local function indexable(r)
  return r[ST] == 'A' and r[WITHHELD] == ''
end

-- Stores `r` (new or changed from `old`), keeping every index and counter in step.
-- Key TTLs only need extending when the record's lifetime is new or grows: an unchanged
-- hard expiry was covered when it was first written.
-- `owned` may be passed when the caller already knows it (saves a lookup).
-- `stored` may be passed when the caller already has `r`'s stored form (saves encoding it).
function P.put_record(id, r, old, owned, stored)
  local hard = P.num(r[HARD])
  local bid = P.bin(id)
  local grows = not old or hard > P.num(old[HARD])
  if owned == nil then
    owned = (indexable(r) or (old and indexable(old))) and P.is_owned(id)
  end
  local was_in = old and indexable(old) and not owned
  local is_in = indexable(r) and not owned
  if was_in and is_in and P.same_filters(old, r) then
    -- Still available under the same filters: only the score and the capacity may move.
    if old[USABLE] ~= r[USABLE] or grows then
      P.index_add(id, r)
    end
    P.slots(r, P.num(r[MAXS]) - P.num(old[MAXS]))
  else
    if was_in then
      P.index_remove(id, old)
    end
    if is_in then
      P.index_add(id, r)
    end
  end
  if not old or old[HARD] ~= r[HARD] then
    redis.call('ZADD', B .. 'expiry', r[HARD], bid)
  end
  if not old or old[WITHHELD] ~= r[WITHHELD] then
    if r[WITHHELD] ~= '' then
      redis.call('ZADD', B .. 'withheld', r[WITHHELD], bid)
      P.touch(B .. 'withheld', hard)
    elseif old and old[WITHHELD] ~= '' then
      redis.call('ZREM', B .. 'withheld', bid)
    end
  end
  local score = P.check_score(r)
  if score then
    if not old or score ~= P.check_score(old) then
      redis.call('ZADD', B .. 'checks', score, bid)
    end
    P.touch(B .. 'checks', hard)
  elseif old and P.check_score(old) then
    redis.call('ZREM', B .. 'checks', bid)
  end
  if old then
    P.bump_owner_if_listed_changed(id, old, r, owned)
    P.recount(old, r, grows)
  else
    P.count(r, 1, true)
  end
  redis.call('HSET', B .. 'records', bid, stored or P.encode_stored(r))
  if r[ST] == 'X' then
    -- An extraction ends the lease generation: no earlier ticket names the proxy again.
    if not old or old[ST] ~= 'X' then
      redis.call('HDEL', B .. 'lease-epoch', id)
    end
  elseif old and old[ST] == 'X' then
    redis.call('HDEL', B .. 'extracted-by', id)
    redis.call('HDEL', B .. 'given-back', id)
  end
  if grows then
    P.touch(B .. 'records', hard)
    P.touch(B .. 'expiry', hard)
    -- A longer life keeps the record's cooldowns too (a PTTL at the end; nothing when the
    -- pool has none).
    P.touch_key(B .. 'cooldowns', hard)
    P.touch_key(B .. 'cooldown-forget', hard)
  end
end

-- Whether `fresh`, a vendor's listing of the live `incumbent`, starts a new generation of a
-- proxy its client gave back: new credentials or a later issue time (MemoryPool:
-- proxypool_core::extract::renews_given_back).
function P.renews_given_back(incumbent, fresh)
  if incumbent[ST] ~= 'X' or redis.call('HEXISTS', B .. 'given-back', fresh[ID]) == 0 then
    return false
  end
  if fresh[USER] ~= incumbent[USER] or fresh[PASS] ~= incumbent[PASS] then
    return true
  end
  return fresh[ISSUED] ~= '' and (incumbent[ISSUED] == '' or P.num(fresh[ISSUED]) > P.num(incumbent[ISSUED]))
end

-- Re-evaluates a record's place in the candidate indexes (after ownership changed).
function P.reindex(id)
  local r = P.get_record(id)
  if r then
    P.index_remove(id, r)
    if indexable(r) and not P.is_owned(id) then
      P.index_add(id, r)
    end
  end
end

-- Removes a record with its indexes, counters and assignment; returns (record, assignment).
function P.remove_record(id)
  local bid = P.bin(id)
  local v = redis.call('HGET', B .. 'records', bid)
  redis.call('ZREM', B .. 'expiry', bid)
  redis.call('ZREM', B .. 'checks', bid)
  redis.call('ZREM', B .. 'withheld', bid)
  if not v then
    return nil
  end
  local r = P.decode_stored(v, id)
  redis.call('HDEL', B .. 'records', bid)
  if r[ST] == 'X' then
    redis.call('HDEL', B .. 'extracted-by', id)
    redis.call('HDEL', B .. 'given-back', id)
  else
    redis.call('HDEL', B .. 'lease-epoch', id)
  end
  -- Cooldowns belong to the record (cooldowns.lua): a later lifetime starts clean.
  redis.call('HDEL', B .. 'cooldowns', id)
  redis.call('ZREM', B .. 'cooldown-forget', id)
  P.index_remove(id, r)
  P.count(r, -1, false)
  local a = P.drop_assignment(id)
  return r, a
end

-- Removes up to `limit` hard-expired records: (records, assignments, more waiting).
function P.remove_expired(limit)
  local due = redis.call('ZRANGEBYSCORE', B .. 'expiry', '-inf', NOW, 'LIMIT', 0, limit + 1)
  local records, assignments = 0, 0
  for i = 1, math.min(#due, limit) do
    local r, a = P.remove_record(P.hex(due[i]))
    if r then
      records = records + 1
      if a then
        assignments = assignments + 1
      end
    end
  end
  return records, assignments, #due > limit
end
