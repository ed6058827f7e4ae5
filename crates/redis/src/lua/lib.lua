-- lib.lua: helpers shared by every activity-pool function, defined once when the library
-- is loaded (FUNCTION LOAD; see src/scripts.rs), not on every call.
--
-- Calling convention: KEYS[1] is the keyspace base "<prefix>:{activity}:" (declared as a key
-- so a cluster-aware client routes the call to the one slot of the {activity} hash tag);
-- ARGV[1] = logical now (ms), ARGV[2] = expired records to remove on the side (0 in read
-- calls), ARGV[3] = slack (ms) added to native key TTLs, ARGV[4] = the caller's leader
-- term ("<lease name>\t<token>", or "" when the call is not fenced). P.begin takes ARGV[4]
-- out, so each entry point's own arguments start at ARGV[4].
--
-- Every time decision compares with ARGV now, never with the server clock: native TTLs are
-- only a memory safety net, so a store that time-travels (the contract suite) stays exact.
--
-- Proxy ids: scripts take and answer the 32-hex-digit id; `records`, `expiry`, `checks`
-- and the candidate indexes store it as its 16 bytes (P.bin / P.hex), which saves ~16 bytes
-- in every one of those entries. The other keys (owners, cooldowns, ...) keep the hex id.
--
-- Invariants kept by put_record / remove_record / put_assignment / drop_assignment:
-- * a record is in exactly one candidate index, `cand:<protocol>/<upstream>/<region>/
--   <carrier>` (its filter combination, '' for no region/carrier), when it is AVAILABLE and
--   has no assignment, and in none otherwise (whatever the time; entries past usable_until
--   stay until removal);
-- * `candidates` holds the suffix of every non-empty candidate index (and no other), scored
--   by that index's highest score, and `candidate-heads` the id of that highest member (the
--   head; ties by id, as in the index): an extraction merges the matching indexes by
--   (score, id) and reads an index only once its head was taken. Both are brought up to
--   date once per call for every index the call changed (P.flush_candidates);
-- * `expiry` holds every record, `checks` every FETCHED/SUSPECT/AVAILABLE/UNHEALTHY one;
-- * `inventory` holds per upstream the un-extracted P.count(field "<u>") and the count per
--   status (field "<u>:<code>"); zero counters are deleted.

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

-- Record fields (tab separated; hot fields first). Mirrors src/codec/record.rs.
local ST, HARD, USABLE, SUCC, PROTO, UP, REGION, CARRIER, MAXS = 1, 2, 3, 4, 5, 6, 7, 8, 9
local CHECKED, LAT, FAILS, ERR, FETCHED, ID = 10, 11, 12, 13, 14, 15
local USER, PASS, LABELS = 18, 19, 20
local NFIELDS = 20

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

-- Assignment fields (owners hash value). Mirrors src/codec/assignment.rs.
local A_WORKER, A_EPOCH, A_ASSIGNED, A_LEASE, A_UP = 1, 2, 3, 4, 5

-- Session fields (worker-sessions hash value). Mirrors src/codec/session.rs. S_STALE:
-- the stale entries of the last report (ids joined by ','), so a replay answers the same.
local S_ID, S_OPENED, S_EXPIRES, S_ACKED, S_SEQ, S_DIGEST, S_STALE = 1, 2, 3, 4, 5, 6, 7

-- Statuses counted against max_size, and those health checks may change.
local UNEXTRACTED = { F = true, C = true, A = true, S = true, U = true }
local ACCEPTS_HEALTH = { F = true, C = true, A = true, S = true, U = true }

-- checks score = class * 2^45 + since: (score, id) order is MemoryPool's due order.
local CLASS = 35184372088832

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

-- Native TTLs: remember per key the latest logical expiry written, extend once at the end.
-- `anchor` is the latest expiry of pool state (records, leases, sessions): the epoch and
-- the key registry must outlive it; stored results (idempotency, operations) do not count.
function P.touch_key(key, at)
  local current = horizon[key]
  if current == nil or at > current then
    horizon[key] = at
  end
end

function P.touch(key, at)
  P.touch_key(key, at)
  if anchor == nil or at > anchor then
    anchor = at
  end
end

-- One PTTL per key, and a PEXPIRE only when the key would die too early. An extension
-- adds one more slack on top, so a key whose horizon moves with time (usage, idempotency)
-- is extended about once per slack rather than on every call, and a key whose horizon is
-- already covered (the common case) costs a single read. A key lives between one and two
-- slacks past the latest logical expiry it holds.
function P.keep(key, at)
  local need = at - NOW + SLACK
  local left = redis.call('PTTL', key)
  if left == -2 or left >= need then
    return
  end
  redis.call('PEXPIRE', key, P.fmt(math.max(1, need + SLACK)))
end

function P.flush_ttls()
  for key, at in pairs(horizon) do
    P.keep(key, at)
  end
  if anchor ~= nil then
    -- The epoch, the key registry and the snapshot versions live as long as anything that
    -- refers to them.
    P.keep(B .. 'epoch', anchor)
    P.keep(B .. 'keys', anchor)
    P.keep(B .. 'snapshot-versions', anchor)
  end
end

-- Snapshot versions (`snapshot-versions` HASH worker -> counter; the field '*feedback',
-- never a worker id, counts session feedback): every write that may change what a
-- worker's snapshot lists moves its counter, so a waiting long-poll reads the counters
-- (snapshot_version.lua) instead of the records. The hash lives as long as the epoch, so
-- a counter starts over only once every session it could describe has lapsed.
function P.bump_snapshot(field)
  redis.call('HINCRBY', B .. 'snapshot-versions', field, 1)
  -- Created by a call that wrote no pool state: at least a slack of life.
  P.touch_key(B .. 'snapshot-versions', NOW)
end

-- Counters that reach zero are deleted so the inventory hash stays bounded.
function P.hincr(key, field, delta)
  local value = redis.call('HINCRBY', key, field, delta)
  if value <= 0 then
    redis.call('HDEL', key, field)
  end
  return value
end

-- Moves `r`'s counters by `delta`. `extend`: the record's lifetime is new or grows. A
-- counter that was just created may have recreated the hash (it is deleted when empty),
-- so that extends the TTL too.
function P.count(r, delta, extend)
  local key = B .. 'inventory'
  local created = false
  if UNEXTRACTED[r[ST]] then
    created = P.hincr(key, r[UP], delta) == delta
  end
  created = P.hincr(key, r[UP] .. ':' .. r[ST], delta) == delta or created
  if extend or (delta > 0 and created) then
    P.touch(key, P.num(r[HARD]))
  end
end

-- Counters for `old` becoming `r`: only what changed (same upstream, same status and
-- same un-extracted state cancel out).
function P.recount(old, r, extend)
  if old[UP] ~= r[UP] then
    P.count(old, -1, false)
    P.count(r, 1, extend)
    return
  end
  local key = B .. 'inventory'
  local created = false
  local was, is = UNEXTRACTED[old[ST]] or false, UNEXTRACTED[r[ST]] or false
  if is and not was then
    created = P.hincr(key, r[UP], 1) == 1
  elseif was and not is then
    P.hincr(key, r[UP], -1)
  end
  if old[ST] ~= r[ST] then
    P.hincr(key, old[UP] .. ':' .. old[ST], -1)
    created = P.hincr(key, r[UP] .. ':' .. r[ST], 1) == 1 or created
  end
  if extend or created then
    P.touch(key, P.num(r[HARD]))
  end
end

-- The candidate index suffix of a record: its filter combination. '/' appears in no
-- protocol, upstream id or label, so the suffix splits back into its four values.
function P.candidate_suffix(r)
  return r[PROTO] .. '/' .. r[UP] .. '/' .. r[REGION] .. '/' .. r[CARRIER]
end

-- Index keys registered in this call (`registered`, reset by P.begin): the registry needs
-- each name once, not per record.

function P.register(k)
  if not registered[k] then
    registered[k] = true
    redis.call('SADD', B .. 'keys', k)
  end
end

-- The upstream's unowned candidates also keep a running sum of their max_sessions
-- (inventory field "<u>:slots"), so an inventory read need not visit every candidate.
function P.slots(r, delta)
  if delta ~= 0 then
    local key = B .. 'inventory'
    if P.hincr(key, r[UP] .. ':slots', delta) == delta and delta > 0 then
      P.touch(key, P.num(r[HARD]))
    end
  end
end

function P.index_add(id, r)
  local hard = P.num(r[HARD])
  local suffix = P.candidate_suffix(r)
  local index = B .. 'cand:' .. suffix
  if redis.call('ZADD', index, r[USABLE], P.bin(id)) == 1 then
    P.slots(r, P.num(r[MAXS]))
  end
  moved[suffix] = true
  P.touch(index, hard)
  P.touch(B .. 'candidates', hard)
  P.touch(B .. 'candidate-heads', hard)
end

function P.index_remove(id, r)
  local suffix = P.candidate_suffix(r)
  if redis.call('ZREM', B .. 'cand:' .. suffix, P.bin(id)) == 0 then
    return
  end
  P.slots(r, -P.num(r[MAXS]))
  moved[suffix] = true
end

-- The candidate registry (`candidates`) holds one member per non-empty candidate index:
-- its head's 16-byte id followed by the index suffix, scored by the head's usable_until.
-- So the registry's own order, (score, member) descending, is the order of the heads by
-- (usable_until, id): the first matching member is the best head of a merge, with no head
-- read and no id compared in Lua. `candidate-heads` (suffix -> head id) finds the member
-- to replace when a head changes.
local ID_BYTES = 16

function P.registry_suffix(member)
  return string.sub(member, ID_BYTES + 1)
end

-- The current head of `suffix`'s index as the registry names it (false: none).
local function registered_head(suffix)
  local head = known_heads[suffix]
  if head == nil then
    head = redis.call('HGET', B .. 'candidate-heads', suffix) or false
  end
  return head
end

-- The registry entry of every candidate index this call changed: one read of its head
-- each, however many records moved (an upsert batch touches a few indexes).
function P.flush_candidates()
  for suffix in pairs(moved) do
    local old = registered_head(suffix)
    local head = redis.call('ZREVRANGE', B .. 'cand:' .. suffix, 0, 0, 'WITHSCORES')
    local new = head[1] or false
    if old and old ~= new then
      redis.call('ZREM', B .. 'candidates', old .. suffix)
    end
    if new then
      redis.call('ZADD', B .. 'candidates', head[2], new .. suffix)
      if new ~= old then
        redis.call('HSET', B .. 'candidate-heads', suffix, new)
      end
    elseif old then
      redis.call('HDEL', B .. 'candidate-heads', suffix)
    end
    known_heads[suffix] = new
  end
  moved = {}
end

-- Candidate indexes matching `filter` (fields PROTO, UP, REGION, CARRIER; '' = any) merged
-- into one stream in MemoryPool's order, usable_until then id descending, members with
-- usable_until > NOW only. Returns a function giving the next hex id (nil at the end).
-- The registry supplies every index's head already in that order (read a page at a time,
-- the first page sized for the call); an index is opened, one page from its second member
-- on, only once its head was taken. So a single-proxy extraction costs one small registry
-- read whatever the number of indexes. `first_page` sizes an index's first page and, with
-- no filter, the first registry page (at least 32 with one); later pages double up to 1024.
-- The four filter values of a candidate index suffix, kept between calls (a pure function
-- of the suffix; dropped wholesale past a bound so an ever-changing set of combinations
-- cannot grow it without limit).
local suffix_fields, suffix_count = {}, 0

local function split_suffix(suffix)
  local f = suffix_fields[suffix]
  if f == nil then
    if suffix_count >= 10000 then
      suffix_fields, suffix_count = {}, 0
    end
    f = P.split(suffix, '/')
    suffix_fields[suffix] = f
    suffix_count = suffix_count + 1
  end
  return f
end

function P.candidate_stream(filter, first_page)
  -- What this call removed so far (expired records) must show in the registry read below.
  P.flush_candidates()
  local floor = '(' .. P.fmt(NOW)
  local any = filter[PROTO] == '' and filter[UP] == '' and filter[REGION] == '' and filter[CARRIER] == ''
  -- Registry cursor: the current page of members, the next position in it.
  -- A filter skips the members of other combinations, so its first page is larger.
  local reg, reg_pos, reg_offset, reg_page, reg_done = {}, 1, 0, any and first_page or math.max(first_page, 32), false
  -- The next matching head not yet handed out: suffix, binary id, registry member, score
  -- once read (nil: none left; false: handed out, the next one not read yet).
  local head = nil
  -- Opened indexes: { index, id, score (the current member, binary id), buf_ids,
  -- buf_scores, pos (next in the buffer), offset, page, done, taken }.
  local open = {}

  local function matches(suffix)
    if any then
      return true
    end
    local f = split_suffix(suffix)
    return (filter[PROTO] == '' or filter[PROTO] == f[1])
      and (filter[UP] == '' or filter[UP] == f[2])
      and (filter[REGION] == '' or filter[REGION] == f[3])
      and (filter[CARRIER] == '' or filter[CARRIER] == f[4])
  end

  -- Reads the next matching registry member into `head` (nil at the registry's end).
  local function read_head()
    while true do
      if reg_pos > #reg then
        if reg_done then
          head = nil
          return
        end
        -- Without scores: a head's score is only needed to compare it with an opened
        -- index's member (head_score), which a single-proxy extraction never does.
        reg = redis.call('ZREVRANGEBYSCORE', B .. 'candidates', '+inf', floor, 'LIMIT', reg_offset, reg_page)
        reg_pos = 1
        reg_offset = reg_offset + #reg
        reg_done = #reg < reg_page
        reg_page = math.min(reg_page * 2, 1024)
      end
      if reg_pos <= #reg then
        local member = reg[reg_pos]
        local suffix = string.sub(member, ID_BYTES + 1)
        reg_pos = reg_pos + 1
        -- Read after this call's flush: what the registry says is the head (saves the
        -- lookup when this call moves the index).
        known_heads[suffix] = string.sub(member, 1, ID_BYTES)
        if matches(suffix) then
          head = { suffix = suffix, id = known_heads[suffix], member = member }
          return
        end
      end
    end
  end

  -- Moves `c` to its next member (nil id at its end), reading a page when needed.
  local function advance(c)
    if c.buf_ids == nil or c.pos > #c.buf_ids then
      if c.done then
        c.id = nil
        return
      end
      local got = redis.call('ZREVRANGEBYSCORE', c.index, '+inf', floor, 'WITHSCORES', 'LIMIT', c.offset, c.page)
      c.buf_ids, c.buf_scores, c.pos = {}, {}, 1
      for i = 1, #got, 2 do
        c.buf_ids[#c.buf_ids + 1] = got[i]
        c.buf_scores[#c.buf_scores + 1] = P.num(got[i + 1])
      end
      c.offset = c.offset + #c.buf_ids
      c.done = #c.buf_ids < c.page
      c.page = math.min(c.page * 2, 1024)
      if #c.buf_ids == 0 then
        c.id = nil
        return
      end
    end
    c.id, c.score = c.buf_ids[c.pos], c.buf_scores[c.pos]
    c.pos = c.pos + 1
  end

  -- The opened index whose current member is the greatest (score, id). An index whose
  -- member was just handed out moves on here, when the next one is wanted, not before.
  local function best_open()
    local best = nil
    for _, c in ipairs(open) do
      if c.taken then
        c.taken = false
        advance(c)
      end
      if c.id ~= nil then
        if best == nil or c.score > best.score or (c.score == best.score and P.bin_greater(c.id, best.id)) then
          best = c
        end
      end
    end
    return best
  end

  local function head_score()
    if head.score == nil then
      head.score = P.num(redis.call('ZSCORE', B .. 'candidates', head.member))
    end
    return head.score
  end

  local started = false
  return function()
    if not started or head == false then
      -- `false`: the head was handed out; the next one is read when wanted.
      started = true
      read_head()
    end
    local best = best_open()
    if head ~= nil and (best == nil or head_score() > best.score or (head.score == best.score and P.bin_greater(head.id, best.id))) then
      -- The index's later members enter the merge from its second member on.
      open[#open + 1] = { index = B .. 'cand:' .. head.suffix, offset = 1, page = first_page, done = false, taken = true }
      local id = head.id
      head = false
      return P.hex(id)
    elseif best ~= nil then
      best.taken = true
      return P.hex(best.id)
    end
    return nil
  end
end

function P.same_filters(a, b)
  return a[PROTO] == b[PROTO] and a[UP] == b[UP] and a[REGION] == b[REGION] and a[CARRIER] == b[CARRIER]
end

function P.check_score(r)
  local s = r[ST]
  if s == 'F' then
    return P.num(r[FETCHED])
  elseif s == 'S' then
    return CLASS + (P.num(r[CHECKED]) or 0)
  elseif s == 'A' or s == 'U' then
    return 2 * CLASS + (P.num(r[CHECKED]) or 0)
  end
  return nil
end

-- Record fields a snapshot neither carries nor decides on: the health bookkeeping the
-- checker rewrites on every check of a proxy that stays AVAILABLE, and the fetch time.
local HEALTH_ONLY = { [SUCC] = true, [CHECKED] = true, [LAT] = true, [FAILS] = true, [ERR] = true, [FETCHED] = true }

-- Moves the snapshot version of the worker holding `id` when `r` changes what a snapshot
-- listing it would say (MemoryPool: differs_for_snapshot). `owned` false: the caller knows
-- no worker holds it.
function P.bump_owner_if_listed_changed(id, old, r, owned)
  if owned == false then
    return
  end
  for i = 1, NFIELDS do
    if not HEALTH_ONLY[i] and old[i] ~= r[i] then
      local a = P.get_assignment(id)
      if a then
        P.bump_snapshot(a[A_WORKER])
      end
      return
    end
  end
end

function P.is_owned(id)
  return redis.call('HEXISTS', B .. 'owners', id) == 1
end

-- The record (and its stored text, for a caller that changes only what it can patch).
function P.get_record(id)
  local v = redis.call('HGET', B .. 'records', P.bin(id))
  if not v then
    return nil
  end
  return P.decode_stored(v, id), v
end

-- A record that exists and has not reached its hard expiry.
function P.live_record(id)
  local r = P.get_record(id)
  if r and NOW < P.num(r[HARD]) then
    return r
  end
  return nil
end

function P.is_usable(r)
  return r[ST] == 'A' and NOW < P.num(r[USABLE])
end

-- Stores `r` (new or changed from `old`), keeping every index and counter in step.
-- Key TTLs only need extending when the record's lifetime is new or grows: an unchanged
-- hard expiry was covered when it was first written.
-- `owned` may be passed when the caller already knows it (saves a lookup).
-- `stored` may be passed when the caller already has `r`'s stored form (saves encoding it).
function P.put_record(id, r, old, owned, stored)
  local hard = P.num(r[HARD])
  local bid = P.bin(id)
  local grows = not old or hard > P.num(old[HARD])
  if owned == nil then
    owned = (r[ST] == 'A' or (old and old[ST] == 'A')) and P.is_owned(id)
  end
  local was_in = old and old[ST] == 'A' and not owned
  local is_in = r[ST] == 'A' and not owned
  if was_in and is_in and P.same_filters(old, r) then
    -- Still available under the same filters: only the score and the capacity may move.
    if old[USABLE] ~= r[USABLE] or grows then
      P.index_add(id, r)
    end
    P.slots(r, P.num(r[MAXS]) - P.num(old[MAXS]))
  else
    if was_in then
      P.index_remove(id, old)
    end
    if is_in then
      P.index_add(id, r)
    end
  end
  if not old or old[HARD] ~= r[HARD] then
    redis.call('ZADD', B .. 'expiry', r[HARD], bid)
  end
  local score = P.check_score(r)
  if score then
    if not old or score ~= P.check_score(old) then
      redis.call('ZADD', B .. 'checks', score, bid)
    end
    P.touch(B .. 'checks', hard)
  elseif old and P.check_score(old) then
    redis.call('ZREM', B .. 'checks', bid)
  end
  if old then
    P.bump_owner_if_listed_changed(id, old, r, owned)
    P.recount(old, r, grows)
  else
    P.count(r, 1, true)
  end
  redis.call('HSET', B .. 'records', bid, stored or P.encode_stored(r))
  if old and old[ST] == 'X' and r[ST] ~= 'X' then
    redis.call('HDEL', B .. 'extracted-by', id)
  end
  if grows then
    P.touch(B .. 'records', hard)
    P.touch(B .. 'expiry', hard)
    -- A longer life keeps the record's cooldowns too (a PTTL at the end; nothing when the
    -- pool has none).
    P.touch_key(B .. 'cooldowns', hard)
    P.touch_key(B .. 'cooldown-forget', hard)
  end
end

-- Re-evaluates a record's place in the candidate indexes (after ownership changed).
function P.reindex(id)
  local r = P.get_record(id)
  if r then
    P.index_remove(id, r)
    if r[ST] == 'A' and not P.is_owned(id) then
      P.index_add(id, r)
    end
  end
end

function P.get_assignment(id)
  local v = redis.call('HGET', B .. 'owners', id)
  if not v then
    return nil
  end
  local a = P.split(v, '\t')
  if #a ~= 5 then
    P.corrupt('assignment')
  end
  return a
end

function P.drain_ticket(id)
  return redis.call('HGET', B .. 'drain-tickets', id) or nil
end

-- Removes an assignment with its lease and per-worker/upstream indexes; returns it and its
-- drain ticket (or nil). `keep_out` skips putting the proxy back into the candidate
-- indexes (the caller stores a new assignment right away).
function P.drop_assignment(id, keep_out)
  local a = P.get_assignment(id)
  if not a then
    return nil
  end
  local ticket = P.drain_ticket(id)
  P.bump_snapshot(a[A_WORKER])
  redis.call('HDEL', B .. 'owners', id)
  redis.call('ZREM', B .. 'owner-expiry', id)
  redis.call('ZREM', B .. 'worker-owned:' .. a[A_WORKER], id)
  redis.call('ZREM', B .. 'worker-draining:' .. a[A_WORKER], id)
  redis.call('ZREM', B .. 'owned:' .. a[A_UP], id)
  if ticket then
    redis.call('HDEL', B .. 'drain-tickets', id)
  end
  if not keep_out then
    P.reindex(id)
  end
  return a, ticket
end

-- Releases `id`'s assignment and appends what was released to a release answer `out`
-- (id, the assignment's fields, its drain ticket); nothing when it had none.
function P.release_into(out, id)
  local a, ticket = P.drop_assignment(id)
  if a then
    out[#out + 1] = id
    out[#out + 1] = table.concat(a, '\t')
    out[#out + 1] = ticket or ''
  end
end

-- Stores an assignment (`ticket` = drain epoch when draining) with its indexes.
function P.put_assignment(id, a, ticket)
  P.drop_assignment(id, true)
  local lease = P.num(a[A_LEASE])
  local per_worker = ticket and 'worker-draining:' or 'worker-owned:'
  P.bump_snapshot(a[A_WORKER])
  redis.call('HSET', B .. 'owners', id, table.concat(a, '\t'))
  redis.call('ZADD', B .. 'owner-expiry', a[A_LEASE], id)
  redis.call('ZADD', B .. per_worker .. a[A_WORKER], a[A_LEASE], id)
  redis.call('ZADD', B .. 'owned:' .. a[A_UP], a[A_LEASE], id)
  P.register(per_worker .. a[A_WORKER])
  P.register('owned:' .. a[A_UP])
  if ticket then
    redis.call('HSET', B .. 'drain-tickets', id, ticket)
    P.touch(B .. 'drain-tickets', lease)
  end
  for _, k in ipairs({ 'owners', 'owner-expiry', per_worker .. a[A_WORKER], 'owned:' .. a[A_UP] }) do
    P.touch(B .. k, lease)
  end
  P.reindex(id)
end

-- Removes a record with its indexes, counters and assignment; returns (record, assignment).
function P.remove_record(id)
  local bid = P.bin(id)
  local v = redis.call('HGET', B .. 'records', bid)
  redis.call('ZREM', B .. 'expiry', bid)
  redis.call('ZREM', B .. 'checks', bid)
  if not v then
    return nil
  end
  local r = P.decode_stored(v, id)
  redis.call('HDEL', B .. 'records', bid)
  if r[ST] == 'X' then
    redis.call('HDEL', B .. 'extracted-by', id)
  end
  -- Cooldowns belong to the record (cooldown.lua): a later lifetime starts clean.
  redis.call('HDEL', B .. 'cooldowns', id)
  redis.call('ZREM', B .. 'cooldown-forget', id)
  P.index_remove(id, r)
  P.count(r, -1, false)
  local a = P.drop_assignment(id)
  return r, a
end

-- Removes up to `limit` hard-expired records: (records, assignments, more waiting).
function P.remove_expired(limit)
  local due = redis.call('ZRANGEBYSCORE', B .. 'expiry', '-inf', NOW, 'LIMIT', 0, limit + 1)
  local records, assignments = 0, 0
  for i = 1, math.min(#due, limit) do
    local r, a = P.remove_record(P.hex(due[i]))
    if r then
      records = records + 1
      if a then
        assignments = assignments + 1
      end
    end
  end
  return records, assignments, #due > limit
end

-- Runs a script body: corrupt state becomes a {'corrupt', what} reply, TTLs are extended
-- once at the end, Redis errors propagate unchanged.
-- Whether the caller's term is the live one: the lease exists, carries the fence's token,
-- and has not lapsed at NOW. Checked before the script touches anything.
function P.term_is_live()
  if FENCE == '' then
    return true
  end
  local tab = string.find(FENCE, '\t', 1, true)
  if not tab then
    return false
  end
  local v = redis.call('HGET', B .. 'leases', string.sub(FENCE, 1, tab - 1))
  if not v then
    return false
  end
  local l = P.split(v, '\t')
  return #l == 4 and l[2] == string.sub(FENCE, tab + 1) and NOW < P.num(l[4])
end

function P.run(main)
  if not P.term_is_live() then
    return { 'stale_term' }
  end
  local ok, res = pcall(main)
  if ok then
    P.flush_candidates()
    P.flush_ttls()
    return res
  end
  if type(res) == 'table' and res.corrupt then
    -- What the call changed before it stopped stays (Redis does not roll back), so the
    -- registry still follows it.
    P.flush_candidates()
    return { 'corrupt', res.corrupt }
  end
  error(res, 0)
end
