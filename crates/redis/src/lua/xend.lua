-- xend.lua: the last step of an extraction over several groups, in its anchor group (where
-- extract.lua left the claim): completes the claim with the merged response (stored like
-- extract.lua's, with the usage counted once) or aborts it, only while the claim is still
-- the caller's. Whoever ends a claim first
-- decides for every attempt that shares it.
--
-- ARGV[4] stored-response key, ARGV[5] claim key, ARGV[6] claim token, ARGV[7] 'complete'
-- | 'abort', ARGV[8] client, ARGV[9] request digest, ARGV[10] requested count, ARGV[11]
-- idempotency TTL ms, ARGV[12] how long the key stays held past now ('' = only while
-- replayable), ARGV[13..] the parts' records (one encoded record each, EXTRACTED).
-- Reply: {'ok', response} (completed) | {'aborted'} | {'replay', response} (another
-- attempt completed it) | {'conflict', kind} | {'lost'} (the claim ended without a
-- response: another attempt aborted it, or it lapsed).

local function main()
  local key, claim, token, action = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
  local client, digest = ARGV[8], ARGV[9]
  if redis.call('HGET', B .. claim, 'token') ~= token then
    return P.stored_extraction(key, client, digest) or { 'lost' }
  end
  redis.call('DEL', B .. claim)
  if action == 'abort' then
    return { 'aborted' }
  end
  local records = {}
  for i = 13, #ARGV do
    records[#records + 1] = P.decode(ARGV[i], 'extracted record')
  end
  P.usage_extracted(client, records)
  local response = P.store_extraction(key, client, digest, ARGV[10], P.num(ARGV[11]), P.num(ARGV[12]), records)
  return { 'ok', response }
end

return P.run(main)
