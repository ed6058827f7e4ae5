-- feedback_list.lua: the live session feedback, oldest first (MemoryPool:
-- CooldownStore::session_feedback). Read only.
--
-- ARGV[4] limit. Reply: {'ok', feedback (JSON), ...}. Work bound: the store's bound.

local function main()
  local limit = P.num(ARGV[4])
  local out = { 'ok' }
  if limit == 0 then
    return out
  end
  for _, id in ipairs(redis.call('ZRANGE', B .. 'session-feedback-order', 0, -1)) do
    local expires_at = redis.call('ZSCORE', B .. 'session-feedback-expiry', id)
    if expires_at and NOW < P.num(expires_at) then
      local v = redis.call('HGET', B .. 'session-feedback', id)
      if not v then
        P.corrupt('session feedback')
      end
      out[#out + 1] = v
      if #out > limit then
        break
      end
    end
  end
  return out
end

return P.run(main)
