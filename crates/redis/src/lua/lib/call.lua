-- lib/call.lua: the calling convention and the per-call state every helper reads.
--
-- Owns: the helper table P (every helper of the library is a field of it), the per-call
-- upvalues (B, NOW, CLEANUP, SLACK, FENCE and the bookkeeping tables of ttl.lua and
-- candidates.lua) and P.begin, which every entry point calls first.
--
-- Calling convention: KEYS[1] is the keyspace base "<prefix>:{activity}:" (declared as a key
-- so a cluster-aware client routes the call to the one slot of the {activity} hash tag);
-- ARGV[1] = logical now (ms), ARGV[2] = expired records to remove on the side (0 in read
-- calls), ARGV[3] = slack (ms) added to native key TTLs, ARGV[4] = the caller's leader
-- term ("<lease name>\t<token>", or "" when the call is not fenced). P.begin takes ARGV[4]
-- out, so each entry point's own arguments start at ARGV[4].
--
-- Invariant: every time decision compares with ARGV now, never with the server clock:
-- native TTLs are only a memory safety net, so a store that time-travels (the contract
-- suite) stays exact.

local P = {}

-- Per-call state. The library's Lua state outlives a call, so P.begin resets all of it at
-- the start of every entry point; Redis runs one function at a time, so sharing these
-- upvalues between entry points is safe.
local B, NOW, CLEANUP, SLACK, FENCE
local horizon, anchor, registered, moved, known_heads = {}, nil, {}, {}, {}

function P.begin(keys, argv)
  B = keys[1]
  NOW = tonumber(argv[1])
  CLEANUP = tonumber(argv[2])
  SLACK = tonumber(argv[3])
  FENCE = argv[4]
  table.remove(argv, 4)
  horizon, anchor, registered, moved, known_heads = {}, nil, {}, {}, {}
end
