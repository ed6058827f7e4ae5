-- lib/codec.lua: the proxy record as the scripts hold it, and its stored short form.
--
-- Owns: P.decode / P.encode of the full record (NFIELDS tab-separated fields; the field
-- constants ST, HARD, ... are generated from src/codec/record.rs and put in front of the
-- library, see src/scripts.rs), P.encode_stored / P.decode_stored of the form kept in
-- `records`, and P.copy. Invariant: decode_stored(encode_stored(r), id) gives r back.

function P.decode(s, what)
  local r = P.split(s, '\t')
  if #r ~= NFIELDS then
    P.corrupt(what or 'record')
  end
  return r
end

function P.encode(r)
  return table.concat(r, '\t', 1, NFIELDS)
end

-- The stored form of a record leaves its id field empty (the id is the record's field in
-- `records`; repeating it would cost 32 bytes per record) and writes the four other
-- timestamps as their distance below the hard expiry ("3000" rather than a 13-digit
-- time): ~30 bytes less, which moves a typical record into a smaller allocation class.
-- A timestamp that does not fit a double exactly (or a hard expiry that does not) is
-- kept absolute behind '='.
local RELATIVE = { USABLE, SUCC, CHECKED, FETCHED }
local EXACT_DIGITS = 15 -- every 15-digit number is exact in a double

function P.encode_stored(r)
  local hard_text = r[HARD]
  local hard = #hard_text <= EXACT_DIGITS and P.num(hard_text) or nil
  local saved = { r[USABLE], r[SUCC], r[CHECKED], r[FETCHED] }
  for _, f in ipairs(RELATIVE) do
    local x = r[f]
    if x ~= '' then
      if hard and #x <= EXACT_DIGITS then
        r[f] = P.fmt(hard - P.num(x))
      else
        r[f] = '=' .. x
      end
    end
  end
  local id = r[ID]
  r[ID] = ''
  local v = P.encode(r)
  r[ID] = id
  r[USABLE], r[SUCC], r[CHECKED], r[FETCHED] = saved[1], saved[2], saved[3], saved[4]
  return v
end

-- A stored record as scripts and replies see it: absolute times, its id (hex) put back.
function P.decode_stored(v, id)
  local r = P.decode(v)
  local hard = P.num(r[HARD])
  for _, f in ipairs(RELATIVE) do
    local x = r[f]
    if x ~= '' then
      if string.byte(x, 1) == 61 then -- '='
        r[f] = string.sub(x, 2)
      else
        local below = P.num(x)
        if below == nil or hard == nil then
          P.corrupt('record')
        end
        r[f] = P.fmt(hard - below)
      end
    end
  end
  r[ID] = id
  return r
end

function P.copy(r)
  local c = {}
  for i = 1, NFIELDS do
    c[i] = r[i]
  end
  return c
end
