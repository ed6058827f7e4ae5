-- lib/candidates.lua: the candidate indexes, their registry and the merged stream.
--
-- Owns: `cand:<protocol>/<upstream>/<region>/<carrier>` (one sorted set per filter
-- combination, '' for no region/carrier, scored by usable_until), `candidates` and
-- `candidate-heads`, and P.candidate_stream, which an extraction reads; P.labels_match, the
-- filters no candidate index holds.
-- Invariants (kept by records.lua and assignments.lua through P.index_add/index_remove):
-- * a record is in exactly one candidate index, its filter combination, when it is
--   AVAILABLE and has no assignment, and in none otherwise (whatever the time; entries past
--   usable_until stay until removal);
-- * `candidates` holds the suffix of every non-empty candidate index (and no other), scored
--   by that index's highest score, and `candidate-heads` the id of that highest member (the
--   head; ties by id, as in the index): an extraction merges the matching indexes by
--   (score, id) and reads an index only once its head was taken. Both are brought up to
--   date once per call for every index the call changed (P.flush_candidates).

-- The candidate index suffix of a record: its filter combination. '/' appears in no
-- protocol, upstream id or label, so the suffix splits back into its four values.
function P.candidate_suffix(r)
  return r[PROTO] .. '/' .. r[UP] .. '/' .. r[REGION] .. '/' .. r[CARRIER]
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

-- Whether record `r` carries every geo label `wanted` names (label key -> value, '' for
-- any). The labels are stored canonical (core's prepare_batch) and the filter's values are
-- canonical too (ExtractRequest::validate), so the comparison is plain. No index holds
-- them: an extraction checks them on each candidate it examines, within its scan budget.
function P.labels_match(r, wanted)
  local labels = nil
  for key, value in pairs(wanted) do
    if value ~= '' then
      if labels == nil then
        if r[LABELS] == '' then
          return false
        end
        local ok, decoded = pcall(cjson.decode, r[LABELS])
        if not ok or type(decoded) ~= 'table' then
          P.corrupt('record labels')
        end
        labels = decoded
      end
      if labels[key] ~= value then
        return false
      end
    end
  end
  return true
end
