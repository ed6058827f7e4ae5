-- workers.lua: worker session and runtime helpers, prepended after lib.lua to the scripts
-- that read or write sessions, snapshots and runtime reports (the others skip defining
-- them, as every definition costs a closure per call).

local function get_session(worker)
  local v = redis.call('HGET', B .. 'worker-sessions', worker)
  if not v then
    return nil
  end
  local s = split(v, '\t')
  if #s ~= 6 then
    corrupt('session')
  end
  return s
end

local function live_session(worker)
  local s = get_session(worker)
  if s and NOW < num(s[S_EXPIRES]) then
    return s
  end
  return nil
end

local function current_session(worker, session_id)
  local s = live_session(worker)
  if s and s[S_ID] == session_id then
    return s
  end
  return nil
end

local function save_session(worker, s)
  local expires = num(s[S_EXPIRES])
  redis.call('HSET', B .. 'worker-sessions', worker, table.concat(s, '\t'))
  redis.call('ZADD', B .. 'worker-session-expiry', s[S_EXPIRES], worker)
  touch(B .. 'worker-sessions', expires)
  touch(B .. 'worker-session-expiry', expires)
  -- The issued snapshot lives exactly as long as its session.
  if redis.call('HEXISTS', B .. 'worker-snapshots', worker) == 1 then
    redis.call('ZADD', B .. 'worker-snapshot-expiry', s[S_EXPIRES], worker)
    touch(B .. 'worker-snapshots', expires)
    touch(B .. 'worker-snapshot-expiry', expires)
  end
end

local function forget_runtime(worker)
  redis.call('HDEL', B .. 'worker-runtime', worker)
  redis.call('ZREM', B .. 'worker-runtime-expiry', worker)
end

local function forget_snapshot(worker)
  redis.call('HDEL', B .. 'worker-snapshots', worker)
  redis.call('ZREM', B .. 'worker-snapshot-expiry', worker)
end

local function forget_session(worker)
  redis.call('HDEL', B .. 'worker-sessions', worker)
  redis.call('ZREM', B .. 'worker-session-expiry', worker)
  forget_runtime(worker)
  forget_snapshot(worker)
end

-- The issued (not yet acknowledged) snapshot of the worker's session, or ''.
local function issued_snapshot(worker, session_id)
  local v = redis.call('HGET', B .. 'worker-snapshots', worker)
  if not v then
    return ''
  end
  local i = string.find(v, '\t', 1, true)
  if not i then
    corrupt('snapshot')
  end
  if string.sub(v, 1, i - 1) ~= session_id then
    return ''
  end
  return string.sub(v, i + 1)
end

-- Runtime fields: session id, received at, expires at, snapshot epoch, busy map (JSON
-- {proxy id: active + reserved}, non-zero only), full report (JSON, for Rust only).
local function live_runtime(worker)
  local s = live_session(worker)
  if not s then
    return nil
  end
  local v = redis.call('HGET', B .. 'worker-runtime', worker)
  if not v then
    return nil
  end
  local rt = split(v, '\t')
  if #rt ~= 6 then
    corrupt('runtime')
  end
  if NOW < num(rt[3]) and rt[1] == s[S_ID] then
    return rt
  end
  return nil
end

local function busy_map(rt)
  local ok, map = pcall(cjson.decode, rt[5])
  if not ok or type(map) ~= 'table' then
    corrupt('runtime')
  end
  return map
end

