-- lib/workers.lua: worker sessions and runtime reports.
--
-- Owns: `worker-sessions` (worker -> the session's fields, S_ID ... generated from
-- src/codec/session.rs) and the session checks of the entry points that read or write
-- sessions, snapshots and runtime reports.

function P.get_session(worker)
  local v = redis.call('HGET', B .. 'worker-sessions', worker)
  if not v then
    return nil
  end
  local s = P.split(v, '\t')
  -- Without S_STALE: stored before that field existed (no stale entries then).
  if #s == S_STALE - 1 then
    s[S_STALE] = ''
  elseif #s ~= S_FIELDS then
    P.corrupt('session')
  end
  return s
end

function P.live_session(worker)
  local s = P.get_session(worker)
  if s and NOW < P.num(s[S_EXPIRES]) then
    return s
  end
  return nil
end

function P.current_session(worker, session_id)
  local s = P.live_session(worker)
  if s and s[S_ID] == session_id then
    return s
  end
  return nil
end

function P.save_session(worker, s)
  local expires = P.num(s[S_EXPIRES])
  redis.call('HSET', B .. 'worker-sessions', worker, table.concat(s, '\t'))
  redis.call('ZADD', B .. 'worker-session-expiry', s[S_EXPIRES], worker)
  P.touch(B .. 'worker-sessions', expires)
  P.touch(B .. 'worker-session-expiry', expires)
  -- The issued snapshot lives exactly as long as its session.
  if redis.call('HEXISTS', B .. 'worker-snapshots', worker) == 1 then
    redis.call('ZADD', B .. 'worker-snapshot-expiry', s[S_EXPIRES], worker)
    P.touch(B .. 'worker-snapshots', expires)
    P.touch(B .. 'worker-snapshot-expiry', expires)
  end
end

function P.forget_runtime(worker)
  redis.call('HDEL', B .. 'worker-runtime', worker)
  redis.call('ZREM', B .. 'worker-runtime-expiry', worker)
end

function P.forget_snapshot(worker)
  redis.call('HDEL', B .. 'worker-snapshots', worker)
  redis.call('ZREM', B .. 'worker-snapshot-expiry', worker)
end

function P.forget_session(worker)
  -- A long-poll waiting on the forgotten session must see it end.
  P.bump_snapshot(worker)
  redis.call('HDEL', B .. 'worker-sessions', worker)
  redis.call('ZREM', B .. 'worker-session-expiry', worker)
  P.forget_runtime(worker)
  P.forget_snapshot(worker)
end

-- The issued (not yet acknowledged) snapshot of the worker's session, or ''.
function P.issued_snapshot(worker, session_id)
  local v = redis.call('HGET', B .. 'worker-snapshots', worker)
  if not v then
    return ''
  end
  local i = string.find(v, '\t', 1, true)
  if not i then
    P.corrupt('snapshot')
  end
  if string.sub(v, 1, i - 1) ~= session_id then
    return ''
  end
  return string.sub(v, i + 1)
end

-- Runtime fields: session id, received at, expires at, snapshot epoch, busy map (JSON
-- {proxy id: active + reserved}, non-zero only), full report (JSON, for Rust only).
function P.live_runtime(worker)
  local s = P.live_session(worker)
  if not s then
    return nil
  end
  local rt = P.get_fields('worker-runtime', worker, 6, 'runtime')
  if rt and NOW < P.num(rt[3]) and rt[1] == s[S_ID] then
    return rt
  end
  return nil
end

function P.busy_map(rt)
  local ok, map = pcall(cjson.decode, rt[5])
  if not ok or type(map) ~= 'table' then
    P.corrupt('runtime')
  end
  return map
end

