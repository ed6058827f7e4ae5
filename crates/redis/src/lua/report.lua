-- report.lua: stores a full sparse runtime report (MemoryPool: report_runtime): current
-- session, strictly increasing sequence (same sequence + digest = replay), exactly the
-- acknowledged snapshot, non-zero counts only on proxies the worker owns at or before the
-- snapshot's epoch.
--
-- ARGV[4] worker, ARGV[5] session id, ARGV[6] sequence, ARGV[7] digest, ARGV[8] snapshot
-- (canonical JSON), ARGV[9] snapshot epoch, ARGV[10] expires_at, ARGV[11] busy map
-- (JSON), ARGV[12] report (JSON, without its usage), ARGV[13] the gateway's usage
-- (usage.lua's text; '' = none), ARGV[14..] ids with non-zero counts.
-- Reply: {'accepted'} | {'replayed'} | {'conflict', kind}. Work bound: the report size.

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
      return { 'replayed' }
    end
    if P.ucmp(sequence, s[S_SEQ]) <= 0 then
      return { 'conflict', 'sequence' }
    end
  end
  if s[S_ACKED] ~= snapshot then
    return { 'conflict', 'snapshot' }
  end
  for i = 14, #ARGV do
    local a = P.get_assignment(ARGV[i])
    if not a or a[A_WORKER] ~= worker or P.ucmp(a[A_EPOCH], snapshot_epoch) > 0 then
      return { 'conflict', 'ownership' }
    end
  end
  local expires = P.num(ARGV[10])
  redis.call('HSET', B .. 'worker-runtime', worker,
    table.concat({ session_id, P.fmt(NOW), ARGV[10], snapshot_epoch, ARGV[11], ARGV[12] }, '\t'))
  redis.call('ZADD', B .. 'worker-runtime-expiry', ARGV[10], worker)
  P.touch(B .. 'worker-runtime', expires)
  P.touch(B .. 'worker-runtime-expiry', expires)
  s[S_SEQ], s[S_DIGEST] = sequence, digest
  P.save_session(worker, s)
  P.usage_record_gateway(worker, ARGV[13])
  return { 'accepted' }
end

return P.run(main)
