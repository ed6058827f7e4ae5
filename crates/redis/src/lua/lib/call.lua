-- lib/call.lua: the calling convention and the per-call state every helper reads.
--
-- Owns: the helper table P (every helper of the library is a field of it), the per-call
-- upvalues (B, MARK, NOW, CLEANUP, SLACK, FENCE, EXPECT and the bookkeeping tables of
-- ttl.lua, candidates.lua and mark.lua) and P.begin, which every entry point calls first.
--
-- Calling convention: KEYS[1] is the keyspace base of the store's current incarnation
-- "<prefix>:{activity}:v3:<identity>:" (declared as a key so a cluster-aware client routes
-- the call to the one slot of the {activity} hash tag), KEYS[2] the store's mark
-- "<prefix>:{activity}:v3:mark" (mark.lua); ARGV[1] = logical now (ms), ARGV[2] = expired
-- records to remove on the side (0 in read calls), ARGV[3] = slack (ms) added to native
-- key TTLs, ARGV[4] = the caller's leader term ("<lease name>\t<holder>\t<token>", or ""
-- when the call is not fenced), ARGV[5] = the store the caller remembers
-- ("<identity>\t<generation>", or "" when it checks none). P.begin takes ARGV[4] and
-- ARGV[5] out, so each entry point's own arguments start at ARGV[4].
--
-- Invariant: every time decision compares with ARGV now, never with the server clock:
-- native TTLs are only a memory safety net, so a store that time-travels (the contract
-- suite) stays exact.

local P = {}

-- Per-call state. The library's Lua state outlives a call, so P.begin resets all of it at
-- the start of every entry point; Redis runs one function at a time, so sharing these
-- upvalues between entry points is safe.
local B, MARK, NOW, CLEANUP, SLACK, FENCE, EXPECT
local horizon, anchor, registered, moved, known_heads = {}, nil, {}, {}, {}
local recovery_read, recovery_value = false, nil

function P.begin(keys, argv)
  B = keys[1]
  MARK = keys[2]
  NOW = tonumber(argv[1])
  CLEANUP = tonumber(argv[2])
  SLACK = tonumber(argv[3])
  FENCE = argv[4]
  EXPECT = argv[5]
  table.remove(argv, 5)
  table.remove(argv, 4)
  horizon, anchor, registered, moved, known_heads = {}, nil, {}, {}, {}
  recovery_read, recovery_value = false, nil
end
