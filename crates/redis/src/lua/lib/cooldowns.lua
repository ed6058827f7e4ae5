-- lib/cooldowns.lua: cooldowns per (proxy, scope, domain).
--
-- `cooldowns` HASH proxy id -> that proxy's entries, one line per (domain, scope) in that
-- order, each "domain\tuntil\tstrikes\tforget_at\tproject" (C_DOMAIN ... generated from
-- src/codec/cooldown.rs; project '' = shared; a line without the project field, written
-- before scopes existed, is shared);
-- `cooldown-forget` ZSET proxy id -> the earliest forget_at among them, so the sweep finds
-- forgotten entries without visiting every proxy. Both are written only for a live
-- record and dropped with it (P.remove_record), so they never outlive the record.

function P.get_cooldowns(id)
  local v = redis.call('HGET', B .. 'cooldowns', id)
  local out = {}
  if not v then
    return out
  end
  for _, line in ipairs(P.split(v, '\n')) do
    local e = P.split(line, '\t')
    if #e ~= C_FIELDS and #e ~= C_PROJECT - 1 then
      P.corrupt('cooldown')
    end
    out[#out + 1] = { e[C_DOMAIN], P.num(e[C_UNTIL]), P.num(e[C_STRIKES]), P.num(e[C_FORGET]), e[C_PROJECT] or '' }
  end
  return out
end

-- The entries of `id` not yet forgotten at NOW. A merge starts from these, so a forgotten
-- entry's strikes never carry into a new ban (the sweep may not have reached it yet).
function P.remembered_cooldowns(id)
  local kept = {}
  for _, e in ipairs(P.get_cooldowns(id)) do
    if e[C_FORGET] > NOW then
      kept[#kept + 1] = e
    end
  end
  return kept
end

function P.encode_cooldown(e)
  return table.concat({ e[C_DOMAIN], P.fmt(e[C_UNTIL]), P.fmt(e[C_STRIKES]), P.fmt(e[C_FORGET]), e[C_PROJECT] }, '\t')
end

-- Replaces a proxy's entries (already in domain order; empty = none) and its place in
-- the forget index. `hard` is the record's hard expiry: the keys need not outlive it.
function P.put_cooldowns(id, entries, hard)
  -- Every snapshot listing the proxy carries its cooldowns.
  local a = P.get_assignment(id)
  if a then
    P.bump_snapshot(a[A_WORKER], id)
  end
  if #entries == 0 then
    redis.call('HDEL', B .. 'cooldowns', id)
    redis.call('ZREM', B .. 'cooldown-forget', id)
    return
  end
  local lines, earliest = {}, nil
  for i, e in ipairs(entries) do
    lines[i] = P.encode_cooldown(e)
    if earliest == nil or e[C_FORGET] < earliest then
      earliest = e[C_FORGET]
    end
  end
  redis.call('HSET', B .. 'cooldowns', id, table.concat(lines, '\n'))
  redis.call('ZADD', B .. 'cooldown-forget', P.fmt(earliest), id)
  P.touch_key(B .. 'cooldowns', hard)
  P.touch_key(B .. 'cooldown-forget', hard)
end

-- proxypool_core::cooldown::merge_cooldowns, step for step: each change is
-- {op ('s' | 'c'), domain, until, strikes, forget_at, project}, keyed by (project,
-- domain); each scope keeps at most `max` entries, the ones forgotten soonest going first
-- (ties by domain); at most `max_scopes` project scopes stay beside the shared one, those
-- whose latest entry is forgotten soonest going whole (ties by project); the result is in
-- (domain, project) order, shared ('') first.
function P.merge_cooldowns(stored, changes, max, max_scopes)
  for _, c in ipairs(changes) do
    local found = nil
    for i, e in ipairs(stored) do
      if e[C_DOMAIN] == c[2] and e[C_PROJECT] == c[6] then
        found = i
        break
      end
    end
    if c[1] == 's' then
      if found then
        local e = stored[found]
        e[C_UNTIL] = math.max(e[C_UNTIL], c[3])
        e[C_STRIKES] = math.max(e[C_STRIKES], c[4])
        e[C_FORGET] = math.max(e[C_FORGET], c[5])
      else
        stored[#stored + 1] = { c[2], c[3], c[4], c[5], c[6] }
      end
    elseif found then
      table.remove(stored, found)
    end
  end
  local live = {}
  for _, e in ipairs(stored) do
    if e[C_FORGET] > NOW then
      live[#live + 1] = e
    end
  end
  table.sort(live, function(a, b)
    if a[C_PROJECT] ~= b[C_PROJECT] then
      return a[C_PROJECT] < b[C_PROJECT]
    end
    if a[C_FORGET] ~= b[C_FORGET] then
      return a[C_FORGET] > b[C_FORGET]
    end
    return a[C_DOMAIN] < b[C_DOMAIN]
  end)
  local kept, scope, in_scope = {}, nil, 0
  -- Each project scope's latest forget_at: its first entry in this order.
  local projects = {}
  for _, e in ipairs(live) do
    if e[C_PROJECT] ~= scope then
      scope, in_scope = e[C_PROJECT], 0
      if scope ~= '' then
        projects[#projects + 1] = { scope, e[C_FORGET] }
      end
    end
    in_scope = in_scope + 1
    if in_scope <= max then
      kept[#kept + 1] = e
    end
  end
  if #projects > max_scopes then
    table.sort(projects, function(a, b)
      if a[2] ~= b[2] then
        return a[2] > b[2]
      end
      return a[1] < b[1]
    end)
    local staying = {}
    for i = 1, max_scopes do
      staying[projects[i][1]] = true
    end
    local bounded = {}
    for _, e in ipairs(kept) do
      if e[C_PROJECT] == '' or staying[e[C_PROJECT]] then
        bounded[#bounded + 1] = e
      end
    end
    kept = bounded
  end
  table.sort(kept, function(a, b)
    if a[C_DOMAIN] ~= b[C_DOMAIN] then
      return a[C_DOMAIN] < b[C_DOMAIN]
    end
    return a[C_PROJECT] < b[C_PROJECT]
  end)
  return kept
end

-- Whether `id` is cooling down for `domain` at NOW for a client of `project` ('' = none):
-- a shared entry or that project's binds it (extraction's check; one HGET).
function P.is_cooling_for(id, domain, project)
  local v = redis.call('HGET', B .. 'cooldowns', id)
  if not v then
    return false
  end
  for _, line in ipairs(P.split(v, '\n')) do
    local e = P.split(line, '\t')
    local scope = e[C_PROJECT] or ''
    if e[C_DOMAIN] == domain and (scope == '' or scope == project) and NOW < P.num(e[C_UNTIL]) then
      return true
    end
  end
  return false
end

-- Drops the forgotten entries of at most `limit` proxies; true when more are waiting.
function P.forget_cooldowns(limit)
  local due = redis.call('ZRANGEBYSCORE', B .. 'cooldown-forget', '-inf', P.fmt(NOW), 'LIMIT', 0, limit + 1)
  for i = 1, math.min(#due, limit) do
    local id = due[i]
    local r = P.get_record(id)
    local kept = r and P.remembered_cooldowns(id) or {}
    P.put_cooldowns(id, kept, r and P.num(r[HARD]) or NOW)
  end
  return #due > limit
end

-- Session feedback: `session-feedback` HASH id -> feedback (JSON, stored as given),
-- `session-feedback-order` ZSET id -> arrival number (`session-feedback-seq`, INCR),
-- `session-feedback-expiry` ZSET id -> expires_at.
function P.forget_feedback(id)
  redis.call('HDEL', B .. 'session-feedback', id)
  redis.call('ZREM', B .. 'session-feedback-order', id)
  redis.call('ZREM', B .. 'session-feedback-expiry', id)
end

-- Drops session feedback that expired by NOW, at most `limit`.
function P.forget_expired_feedback(limit)
  local due = redis.call('ZRANGEBYSCORE', B .. 'session-feedback-expiry', '-inf', P.fmt(NOW), 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    P.forget_feedback(id)
  end
end
