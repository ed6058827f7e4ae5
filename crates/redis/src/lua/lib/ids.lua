-- lib/ids.lua: proxy ids between their hex form and their 16 bytes.
--
-- Scripts take and answer the 32-hex-digit id; `records`, `expiry`, `checks` and the
-- candidate indexes store it as its 16 bytes (P.bin / P.hex), which saves ~16 bytes in
-- every one of those entries. The other keys (owners, cooldowns, ...) keep the hex id.
-- Invariant: P.bin and P.hex are inverse for every valid id, and binary ids compare
-- bytewise (P.bin_greater), as a sorted set orders its ties.

-- Hex id <-> its 16 bytes, by table lookup (one gsub each, no per-byte Lua calls). Built
-- by the first call that needs them: the string library is not reachable while Redis
-- loads the library.
local TO_BIN, TO_HEX = nil, nil

local function build_id_tables()
  TO_BIN, TO_HEX = {}, {}
  for byte = 0, 255 do
    local hex, char = string.format('%02x', byte), string.char(byte)
    TO_BIN[hex], TO_HEX[char] = char, hex
  end
end

-- The last conversion is remembered: a call converts the same id several times in a row
-- (read the record, store it, move its index entries).
local last_hex, last_bin = nil, nil

function P.bin(id)
  if id == last_hex then
    return last_bin
  end
  if TO_BIN == nil then
    build_id_tables()
  end
  last_hex, last_bin = id, (string.gsub(id, '%x%x', TO_BIN))
  return last_bin
end

function P.hex(bin)
  if bin == last_bin then
    return last_hex
  end
  if TO_HEX == nil then
    build_id_tables()
  end
  last_bin, last_hex = bin, (string.gsub(bin, '.', TO_HEX))
  return last_hex
end

-- Bytewise order of two binary ids (what a sorted set uses for ties). Lua's own string
-- order follows the server's collation locale, which need not be bytewise.
function P.bin_greater(a, b)
  if a == b then
    return false
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end
