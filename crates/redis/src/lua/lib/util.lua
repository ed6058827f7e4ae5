-- lib/util.lua: small text and number helpers every other file uses.
--
-- Owns: splitting, number formatting and parsing, the comparison of u64 decimal strings,
-- P.corrupt, the one way a helper reports undecodable state (P.run turns it into a
-- {'corrupt', what} reply), and the two reads every store of the library is made of: one
-- tab-separated hash entry (P.get_fields) and the live members of an index scored by
-- expiry (P.live_members).

function P.split(s, sep)
  local out, n, pos = {}, 0, 1
  while true do
    local i = string.find(s, sep, pos, true)
    n = n + 1
    if not i then
      out[n] = string.sub(s, pos)
      return out
    end
    out[n] = string.sub(s, pos, i - 1)
    pos = i + 1
  end
end

function P.fmt(n)
  return string.format('%.0f', n)
end

function P.num(s)
  return tonumber(s)
end

-- Unsigned decimal strings without leading zeros (u64 values exceed a double's precision).
function P.ucmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  if a == b then
    return 0
  end
  return a < b and -1 or 1
end

function P.corrupt(what)
  error({ corrupt = what })
end

-- The entry `field` of hash `name` split at tabs, and its stored text; nil when absent.
-- An entry without exactly `count` fields is corrupt state (`what`).
function P.get_fields(name, field, count, what)
  local v = redis.call('HGET', B .. name, field)
  if not v then
    return nil
  end
  local f = P.split(v, '\t')
  if #f ~= count then
    P.corrupt(what)
  end
  return f, v
end

-- The members of sorted set `key` scored above NOW (an index scored by expiry), or nil
-- when there are more than `budget`: the caller answers 'scan_budget' rather than a
-- partial list.
function P.live_members(key, budget)
  local members = redis.call('ZRANGEBYSCORE', key, '(' .. P.fmt(NOW), '+inf', 'LIMIT', 0, budget + 1)
  if #members > budget then
    return nil
  end
  return members
end
