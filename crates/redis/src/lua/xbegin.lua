-- xbegin.lua: the home group's first step of an extraction over several groups
-- (`RedisPool`'s `sharded/extract.rs`): the stored response when there is one, else the
-- extraction's claim, under which each group stores its part.
--
-- ARGV[4] stored-response key ("idem:<extraction id>"), ARGV[5] claim key
-- ("xclaim:<extraction id>"), ARGV[6] client, ARGV[7] request digest, ARGV[8] a new claim
-- token, ARGV[9] how long a claim lives (ms).
-- Reply: {'replay', response} | {'conflict', kind} | {'claimed', token} (the claim in force:
-- this call's, or the one an earlier attempt of the same request left, which it resumes).

local function main()
  local key, claim, client, digest = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
  local answer = P.stored_extraction(key, client, digest)
  if answer then
    return answer
  end
  local current = redis.call('HMGET', B .. claim, 'token', 'client', 'digest')
  if current[1] then
    if current[2] ~= client or current[3] ~= digest then
      return { 'conflict', 'digest' }
    end
    return { 'claimed', current[1] }
  end
  redis.call('HSET', B .. claim, 'token', ARGV[8], 'client', client, 'digest', digest)
  redis.call('PEXPIRE', B .. claim, ARGV[9])
  return { 'claimed', ARGV[8] }
end

return P.run(main)
