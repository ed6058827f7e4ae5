-- lib/mark.lua: the store's mark and the recovery it may carry.
--
-- Owns: the mark, the hash KEYS[2] "<prefix>:{activity}:v3:mark" (identity, generation and,
-- during a recovery, lost_at and hold; no TTL), P.store_lost, which P.run asks before an
-- entry point touches anything, and P.recovery, read by the upsert of a new record.
-- Invariant: a call that remembers a store (ARGV[5], "<identity>\t<generation>") runs only
-- while the mark carries that identity with at least that generation
-- (MemoryPool: Expectation::judge).

-- Why the store is not the one the caller remembers ('missing', 'replaced',
-- 'rolled_back'), or nil when it is (or the caller remembers none).
function P.store_lost()
  if EXPECT == '' then
    return nil
  end
  local e = P.split(EXPECT, '\t')
  local m = redis.call('HMGET', MARK, 'identity', 'generation')
  if not m[1] then
    return 'missing'
  end
  if m[1] ~= e[1] then
    return 'replaced'
  end
  if (P.num(m[2]) or 0) < P.num(e[2]) then
    return 'rolled_back'
  end
  return nil
end

-- The recovery in force ({lost_at, hold}), or nil; read once per call.
function P.recovery()
  if not recovery_read then
    recovery_read = true
    local m = redis.call('HMGET', MARK, 'lost_at', 'hold')
    if m[1] and m[2] then
      recovery_value = { lost_at = P.num(m[1]), hold = P.num(m[2]) }
    end
  end
  return recovery_value
end

-- The mark as the adapter reads it: "identity\tgeneration\tlost_at\thold" ('' where unset),
-- or false when the store has none.
function P.mark_text()
  local m = redis.call('HMGET', MARK, 'identity', 'generation', 'lost_at', 'hold')
  if not m[1] then
    return false
  end
  return table.concat({ m[1], m[2] or '0', m[3] or '', m[4] or '' }, '\t')
end
