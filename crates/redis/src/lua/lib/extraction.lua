-- lib/extraction.lua: stored extraction responses.
--
-- Owns: the stored response of an extraction id (`idem:<id>`, STRING, with `idem-expiry`),
-- read back by P.stored_extraction and written by P.store_extraction, for extract.lua and
-- for the end of an extraction over several groups in its anchor group (`xend.lua`). Invariant: a response is replayed only to its client with its digest, and
-- only while replayable; past that and while the key is held, a reuse is a conflict.

-- What a stored response at `key` answers a request of `client` with `digest`: nil when
-- there is none in force, else a reply ({'replay', response} | {'conflict', kind}).
function P.stored_extraction(key, client, digest)
  local stored = redis.call('GET', B .. key)
  if not stored then
    return nil
  end
  local header = P.split(string.match(stored, '^[^\n]*'), '\t')
  if #header ~= X_FIELDS and #header ~= X_HELD - 1 then
    P.corrupt('extraction')
  end
  local replayable_until = P.num(header[X_EXPIRES])
  local held_until = P.num(header[X_HELD] or header[X_EXPIRES])
  if NOW >= held_until then
    return nil
  end
  if header[X_CLIENT] ~= client or header[X_DIGEST] ~= digest then
    return { 'conflict', 'digest' }
  end
  if NOW >= replayable_until then
    return { 'conflict', 'expired' }
  end
  return { 'replay', stored }
end

-- Stores the response handing out `records` (EXTRACTED) at `key`: replayable for the
-- idempotency TTL `ttl` cut at their earliest hard expiry
-- (proxypool_core::ExtractResponse::replay_ttl_ms, at least 1 ms), held `held` ms past NOW
-- at least as long. Returns the response.
function P.store_extraction(key, client, digest, requested, ttl, held, records)
  local lines, earliest = {}, nil
  for _, r in ipairs(records) do
    lines[#lines + 1] = P.encode(r)
    local hard = P.num(r[HARD])
    if earliest == nil or hard < earliest then
      earliest = hard
    end
  end
  local replay_ttl = ttl
  if earliest ~= nil then
    replay_ttl = math.min(ttl, math.max(0, earliest - NOW))
  end
  replay_ttl = math.max(1, replay_ttl)
  local expires_at = NOW + replay_ttl
  local held_until = math.max(expires_at, NOW + (held or 0))
  local header = table.concat({
    [X_CLIENT] = client,
    [X_DIGEST] = digest,
    [X_EXPIRES] = P.fmt(expires_at),
    [X_REQUESTED] = requested,
    [X_CREATED] = P.fmt(NOW),
    [X_HELD] = P.fmt(held_until),
  }, '\t', 1, X_FIELDS)
  local response = header
  if #lines > 0 then
    response = header .. '\n' .. table.concat(lines, '\n')
  end
  redis.call('SET', B .. key, response, 'PX', P.fmt(held_until - NOW + SLACK))
  redis.call('ZADD', B .. 'idem-expiry', P.fmt(held_until), key)
  P.touch_key(B .. 'idem-expiry', held_until)
  return response
end
