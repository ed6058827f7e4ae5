-- feedback_add.lua: keeps one session feedback (MemoryPool:
-- CooldownStore::add_session_feedback; keys in lib/cooldowns.lua).
--
-- ARGV[4] id, ARGV[5] expires_at, ARGV[6] feedback (JSON), ARGV[7] most kept.
-- Expired feedback goes first; a known id or feedback already expired is a no-op; past
-- the bound the earliest arrivals are dropped.
-- Reply: {'ok'}. Work bound: the bound (the expired and the trimmed) plus cleanup.

local function main()
  P.remove_expired(CLEANUP)
  local id, expires_at, max = ARGV[4], P.num(ARGV[5]), P.num(ARGV[7])
  P.forget_expired_feedback(max)
  if expires_at <= NOW or redis.call('HEXISTS', B .. 'session-feedback', id) == 1 then
    return { 'ok' }
  end
  P.bump_snapshot('*feedback')
  local seq = redis.call('INCR', B .. 'session-feedback-seq')
  redis.call('HSET', B .. 'session-feedback', id, ARGV[6])
  redis.call('ZADD', B .. 'session-feedback-order', seq, id)
  redis.call('ZADD', B .. 'session-feedback-expiry', ARGV[5], id)
  local over = redis.call('ZCARD', B .. 'session-feedback-order') - max
  if over > 0 then
    for _, old in ipairs(redis.call('ZRANGE', B .. 'session-feedback-order', 0, over - 1)) do
      P.forget_feedback(old)
    end
  end
  for _, k in ipairs({ 'session-feedback', 'session-feedback-order', 'session-feedback-expiry', 'session-feedback-seq' }) do
    P.touch_key(B .. k, expires_at)
  end
  return { 'ok' }
end

return P.run(main)
