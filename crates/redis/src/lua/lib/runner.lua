-- lib/runner.lua: how every entry point's body runs.
--
-- Owns: P.run. Invariant: a call that expects another store (mark.lua) or carries a stale
-- term changes nothing; a body that
-- finds corrupt state answers {'corrupt', what} with the candidate registry still
-- following what it changed; TTLs are extended once, at the end of a successful call.

-- Runs a script body: corrupt state becomes a {'corrupt', what} reply, TTLs are extended
-- once at the end, Redis errors propagate unchanged.
function P.run(main)
  local lost = P.store_lost()
  if lost then
    return { 'store_lost', lost }
  end
  if not P.term_is_live() then
    return { 'stale_term' }
  end
  local ok, res = pcall(main)
  if ok then
    P.flush_candidates()
    P.flush_ttls()
    return res
  end
  if type(res) == 'table' and res.corrupt then
    -- What the call changed before it stopped stays (Redis does not roll back), so the
    -- registry still follows it.
    P.flush_candidates()
    return { 'corrupt', res.corrupt }
  end
  error(res, 0)
end
