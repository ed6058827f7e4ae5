-- extract.lua: one exclusive extraction (MemoryPool: memory/extract.rs).
--
-- ARGV[4] stored-response key ("idem:<extraction id>"), ARGV[5] client, ARGV[6] request
-- digest, ARGV[7] count, ARGV[8] mode ('partial' | 'all'), ARGV[9] reserve_for_gateway,
-- ARGV[10] min health freshness ms ('' = none), ARGV[11] idempotency TTL ms,
-- ARGV[12..15] filter protocol, region, carrier, upstream ('' = any), ARGV[16] scan budget,
-- ARGV[17] how long the key stays held past now ('' or 0 = only while replayable; only
-- sent with an idempotency key: ExtractRequest::held_until), ARGV[18] for_domain ('' =
-- any; otherwise candidates cooling down for that domain are skipped, one HGET each),
-- ARGV[19] the client's project, whose own cooldowns count besides the shared ones
-- ('' = the shared ones only), ARGV[20..22] the geo filters city, state, asn, canonical
-- ('' = any; no candidate index holds them, so each candidate examined is checked against
-- its labels: P.labels_match), ARGV[23] the call's role in an extraction over several
-- groups: '' (or absent) for none; 'part' for a group's part (stored at ARGV[4], no usage
-- counted here); 'anchor' for the first call, in the group the extraction id picks, which
-- answers alone when it finds everything and otherwise leaves its part at ARGV[25] under a
-- claim (ARGV[24] claim key, ARGV[26] token, ARGV[27] claim lifetime ms).
--
-- Reply: {'ok', response, reserve left behind, candidates examined} | {'replay', response} |
-- (anchor only) {'claimed', token} (an earlier attempt's claim, to resume) |
-- {'short', part, reserve left behind, candidates examined, first release or ''} | {'conflict', 'digest'} |
-- {'conflict', 'expired'} | {'insufficient', matching} | {'scan_budget'} |
-- {'recovering', first release} (too little found while records are withheld), where response is
-- a header line (X_CLIENT ... X_HELD, generated from src/codec/extraction.rs) followed by
-- one line per record (a response stored before X_HELD existed lacks it: held until expiry).
-- Work bound: the scan budget (candidates examined) plus count writes plus cleanup.

local function main()
  P.remove_expired(CLEANUP)
  local key, client, digest = ARGV[4], ARGV[5], ARGV[6]
  local wanted, mode, reserve = P.num(ARGV[7]), ARGV[8], P.num(ARGV[9])
  local freshness, ttl, budget = P.num(ARGV[10]), P.num(ARGV[11]), P.num(ARGV[16])
  local for_domain, project = ARGV[18], ARGV[19] or ''
  local filter = { [PROTO] = ARGV[12], [REGION] = ARGV[13], [CARRIER] = ARGV[14], [UP] = ARGV[15] }
  local geo = { city = ARGV[20], state = ARGV[21], asn = ARGV[22] }
  local any_geo = geo.city ~= '' or geo.state ~= '' or geo.asn ~= ''

  local answer = P.stored_extraction(key, client, digest)
  if answer then
    return answer
  end
  local role = ARGV[23] or ''
  if role == 'anchor' then
    local claim = redis.call('HMGET', B .. ARGV[24], 'token', 'client', 'digest')
    if claim[1] then
      if claim[2] ~= client or claim[3] ~= digest then
        return { 'conflict', 'digest' }
      end
      return { 'claimed', claim[1] }
    end
  end

  -- Longest-lived first; (score, id) descending is MemoryPool's order. The matching
  -- candidate indexes (one per filter combination) are merged by score.
  local chosen, records, stored_forms, matching, examined = {}, {}, {}, 0, 0
  local next_id = P.candidate_stream(filter, math.min(wanted + reserve + 1, 512))
  while #chosen < wanted do
    local id = next_id()
    if id == nil then
      break
    end
    if examined == budget then
      return { 'scan_budget' }
    end
    examined = examined + 1
    -- Every member of a candidate index is unowned and matches the index's filters
    -- (lib/candidates.lua's invariants, kept in the same atomic calls that assign and store).
    local r, stored = P.get_record(id)
    local accepted = r
      and NOW < P.num(r[HARD])
      and P.is_usable(r)
      and (freshness == nil or (r[SUCC] ~= '' and P.num(r[SUCC]) + freshness >= NOW))
      and (not any_geo or P.labels_match(r, geo))
      and (for_domain == '' or not P.is_cooling_for(id, for_domain, project))
    if accepted then
      matching = matching + 1
      if matching > reserve then
        chosen[#chosen + 1] = id
        records[#records + 1] = r
        stored_forms[#stored_forms + 1] = stored
      end
    end
  end

  -- An anchor that found too little leaves the rest to the other groups (below).
  local short = role == 'anchor' and #chosen < wanted
  -- Too little while a recovery withholds records: say so, with the first release.
  if not short and ((mode == 'all' and #chosen < wanted) or #chosen == 0) then
    local first = redis.call('ZRANGE', B .. 'withheld', 0, 0, 'WITHSCORES')
    if first[2] then
      return { 'recovering', first[2] }
    end
  end
  if not short and mode == 'all' and #chosen < wanted then
    return { 'insufficient', math.max(0, matching - reserve) }
  end

  local taken = {}
  for i, id in ipairs(chosen) do
    local old = records[i]
    local r = P.copy(old)
    r[ST] = 'X'
    -- Checked unowned above, in this same script. Only the status changes, and it is the
    -- stored form's first character.
    P.put_record(id, r, old, false, 'X' .. string.sub(stored_forms[i], 2))
    redis.call('HSET', B .. 'extracted-by', id, client)
    -- touch_key, not touch: the record's hard expiry already anchored the epoch and the
    -- key registry when the record was written, so they need no second look here.
    P.touch_key(B .. 'extracted-by', P.num(r[HARD]))
    taken[#taken + 1] = r
  end
  local reserved, scanned = P.fmt(math.min(matching, reserve)), P.fmt(examined)
  if short then
    -- The part, under a new claim the other groups' parts join (xend.lua ends it).
    local part = P.store_extraction(ARGV[25], client, digest, ARGV[7], ttl, nil, taken)
    redis.call('HSET', B .. ARGV[24], 'token', ARGV[26], 'client', client, 'digest', digest)
    redis.call('PEXPIRE', B .. ARGV[24], ARGV[27])
    local first = redis.call('ZRANGE', B .. 'withheld', 0, 0, 'WITHSCORES')
    return { 'short', part, reserved, scanned, first[2] or '' }
  end
  -- A part's usage is counted when the whole ends (xend.lua).
  if role ~= 'part' then
    P.usage_extracted(client, taken)
  end
  local response = P.store_extraction(key, client, digest, ARGV[7], ttl, P.num(ARGV[17]), taken)
  -- How many matching proxies this call left behind as the reserve, and how many it
  -- examined: a part's share of the whole extraction's reserve and scan budget.
  return { 'ok', response, reserved, scanned }
end

return P.run(main)
