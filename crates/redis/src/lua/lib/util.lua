-- lib/util.lua: small text and number helpers every other file uses.
--
-- Owns: splitting, number formatting and parsing, the comparison of u64 decimal strings,
-- and P.corrupt, the one way a helper reports undecodable state (P.run turns it into a
-- {'corrupt', what} reply).

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
