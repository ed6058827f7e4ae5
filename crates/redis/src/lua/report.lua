-- report.lua: stores a full sparse runtime report (MemoryPool: report_runtime): current
-- session, strictly increasing sequence (same sequence + digest = replay, answered as the
-- first time), exactly the acknowledged snapshot. A busy entry on a proxy the worker does
-- not own with a live lease at or before the snapshot's epoch is stale: it is left out of
-- the stored report and its busy map and named in the reply; the rest applies. An accepted
-- or replayed report renews the session to at least the runtime's expiry.
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] sequence, ARGV[7] digest, ARGV[8] snapshot
-- (canonical JSON), ARGV[9] snapshot epoch, ARGV[10] expires_at (runtime and session),
-- ARGV[11] the stored report's JSON up to its entries array's '[', ARGV[12] the rest from
-- its ']', ARGV[13] the gateway's usage (usage.lua's text; '' = none), ARGV[14..] one
-- triplet per entry in report order: proxy id, active + reserved, the entry's JSON.
-- The stored JSON is spliced from these strings, never re-encoded here: cjson would turn
-- an empty entries array into {} and u64 numbers into doubles.
-- Reply: {'accepted' | 'replayed', session expires_at, stale id...} |
-- {'conflict', kind}. Work bound: the report size.

local function owns_at(id, worker, epoch)
  local a = P.get_assignment(id)
  return a ~= nil and a[A_WORKER] == worker and P.ucmp(a[A_EPOCH], epoch) <= 0
    and NOW < P.num(a[A_LEASE])
end

-- Splits the entries into the stored ones (JSON), the busy map's pairs and the stale ids.
local function judge_entries(worker, epoch)
  local stored, busy, stale = {}, {}, {}
  for i = 14, #ARGV, 3 do
    local id, used, json = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if used == '0' then
      stored[#stored + 1] = json
    elseif owns_at(id, worker, epoch) then
      stored[#stored + 1] = json
      -- Proxy ids are hex digits: nothing to escape.
      busy[#busy + 1] = '"' .. id .. '":' .. used
    else
      stale[#stale + 1] = id
    end
  end
  return stored, busy, stale
end

-- Renews the session (never shortening it) and builds the reply.
local function answer(worker, s, status, stale)
  if P.num(ARGV[10]) > P.num(s[S_EXPIRES]) then
    s[S_EXPIRES] = ARGV[10]
  end
  P.save_session(worker, s)
  local reply = { status, s[S_EXPIRES] }
  for _, id in ipairs(stale) do
    reply[#reply + 1] = id
  end
  return reply
end

local function main()
  P.remove_expired(CLEANUP)
  local worker, session_id, sequence, digest = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
  local snapshot, snapshot_epoch = ARGV[8], ARGV[9]
  local s = P.current_session(worker, session_id)
  if not s then
    return { 'conflict', 'fenced' }
  end
  if s[S_SEQ] ~= '' then
    if sequence == s[S_SEQ] and digest == s[S_DIGEST] then
      local stale = s[S_STALE] == '' and {} or P.split(s[S_STALE], ',')
      return answer(worker, s, 'replayed', stale)
    end
    if P.ucmp(sequence, s[S_SEQ]) <= 0 then
      return { 'conflict', 'sequence' }
    end
  end
  if s[S_ACKED] ~= snapshot then
    return { 'conflict', 'snapshot' }
  end
  local stored, busy, stale = judge_entries(worker, snapshot_epoch)
  -- The gateway serves from a snapshot that no longer matches what it owns: a waiting
  -- long-poll re-checks at once, and re-reads each stale proxy.
  for _, id in ipairs(stale) do
    P.bump_snapshot(worker, id)
  end
  local expires = P.num(ARGV[10])
  local report = ARGV[11] .. table.concat(stored, ',') .. ARGV[12]
  local busy_map = '{' .. table.concat(busy, ',') .. '}'
  redis.call('HSET', B .. 'worker-runtime', worker,
    table.concat({ session_id, P.fmt(NOW), ARGV[10], snapshot_epoch, busy_map, report }, '\t'))
  redis.call('ZADD', B .. 'worker-runtime-expiry', ARGV[10], worker)
  P.touch(B .. 'worker-runtime', expires)
  P.touch(B .. 'worker-runtime-expiry', expires)
  s[S_SEQ], s[S_DIGEST], s[S_STALE] = sequence, digest, table.concat(stale, ',')
  P.usage_record_gateway(worker, ARGV[13])
  return answer(worker, s, 'accepted', stale)
end

return P.run(main)
