-- upsert.lua: one chunk of a vendor batch (MemoryPool: memory/upsert.rs).
--
-- ARGV[4] batch result key ('' = no operation id), ARGV[5] chunk result key ('' = none),
-- ARGV[6] 1 when this chunk is the batch's last, ARGV[7] result expiry (logical ms),
-- ARGV[8] max_size, ARGV[9] upstream, ARGV[10] counts of the earlier chunks
-- "inserted,refreshed,foreign,extracted,over", ARGV[11] dropped counts (JSON, opaque),
-- ARGV[12..] encoded FETCHED records (validated and normalized by prepare_batch).
--
-- Reply: {'batch', "counts\tdropped"} (the batch was done before: its stored report),
-- {'chunk', counts} (this chunk was done before), or {'ok', counts}.
-- Work bound: the chunk size (the adapter splits batches) plus the cleanup count.

local function stored(key)
  if key == '' then
    return nil
  end
  local v = redis.call('GET', B .. key)
  if not v then
    return nil
  end
  local i = string.find(v, '\t', 1, true)
  if not i then
    P.corrupt('operation result')
  end
  -- Logical expiry decides; the native TTL is only the memory safety net.
  if NOW < P.num(string.sub(v, 1, i - 1)) then
    return string.sub(v, i + 1)
  end
  return nil
end

local function store(key, expires_at, value)
  redis.call('SET', B .. key, ARGV[7] .. '\t' .. value, 'PX', P.fmt(math.max(1, expires_at - NOW + SLACK)))
  redis.call('ZADD', B .. 'op-expiry', ARGV[7], key)
  P.touch_key(B .. 'op-expiry', expires_at)
end

-- A refresh may shorten a proxy's life; a lease never outlives usable_until.
local function cut_lease(id, usable_until)
  local a = P.get_assignment(id)
  if a and P.num(a[A_LEASE]) > usable_until then
    local ticket = P.drain_ticket(id)
    a[A_LEASE] = P.fmt(usable_until)
    P.put_assignment(id, a, ticket)
  end
end

-- Stores `fresh` as a new lifetime (or, over `incumbent`, a new generation) of its proxy.
local function insert(id, fresh, incumbent)
  -- First stored while the store recovers from a loss: withheld unless the vendor says
  -- it issued the proxy after the loss (MemoryPool: Recovery::withheld_until).
  local recovery = P.recovery()
  if recovery and not (fresh[ISSUED] ~= '' and P.num(fresh[ISSUED]) > recovery.lost_at) then
    fresh[WITHHELD] = P.fmt(math.min(recovery.lost_at + recovery.hold, P.num(fresh[HARD])))
  end
  P.put_record(id, fresh, incumbent)
end

local function main()
  P.remove_expired(CLEANUP)
  local batch_key, chunk_key, last = ARGV[4], ARGV[5], ARGV[6] == '1'
  local previous = stored(batch_key)
  if previous then
    return { 'batch', previous }
  end
  previous = stored(chunk_key)
  if previous then
    return { 'chunk', previous }
  end

  local expires_at, max_size, upstream = P.num(ARGV[7]), P.num(ARGV[8]), ARGV[9]
  local inserted, refreshed, foreign, extracted, over = 0, 0, 0, 0, 0
  -- Whether the upstream's un-extracted inventory is at max_size (read only for a proxy
  -- that would add to it).
  local function full()
    return (P.num(redis.call('HGET', B .. 'inventory', upstream)) or 0) >= max_size
  end
  for i = 12, #ARGV do
    local fresh = P.decode(ARGV[i], 'candidate')
    local id = fresh[ID]
    local incumbent = P.get_record(id)
    -- An incumbent past its hard expiry is a finished lifetime: clear it first.
    if incumbent and P.num(incumbent[HARD]) <= NOW then
      P.remove_record(id)
      incumbent = nil
    end
    if incumbent and incumbent[UP] ~= fresh[UP] then
      foreign = foreign + 1
    elseif incumbent and P.renews_given_back(incumbent, fresh) then
      -- Given back and re-issued: a new generation, FETCHED (checked before anyone gets
      -- it); the old holder's credentials or issue are no longer the proxy's.
      if full() then
        over = over + 1
      else
        insert(id, fresh, incumbent)
        inserted = inserted + 1
      end
    elseif incumbent and (incumbent[ST] == 'X' or incumbent[ST] == 'R') then
      extracted = extracted + 1
    elseif incumbent then
      local r = P.copy(incumbent)
      r[USER], r[PASS] = fresh[USER], fresh[PASS]
      r[REGION], r[CARRIER], r[LABELS] = fresh[REGION], fresh[CARRIER], fresh[LABELS]
      r[MAXS], r[HARD], r[USABLE] = fresh[MAXS], fresh[HARD], fresh[USABLE]
      P.put_record(id, r, incumbent)
      cut_lease(id, P.num(r[USABLE]))
      refreshed = refreshed + 1
    elseif full() then
      over = over + 1
    else
      insert(id, fresh, nil)
      inserted = inserted + 1
    end
  end

  local counts = table.concat({ inserted, refreshed, foreign, extracted, over }, ',')
  if chunk_key ~= '' then
    store(chunk_key, expires_at, counts)
  end
  if last and batch_key ~= '' then
    local before = P.split(ARGV[10], ',')
    local totals = table.concat({
      P.num(before[1]) + inserted,
      P.num(before[2]) + refreshed,
      P.num(before[3]) + foreign,
      P.num(before[4]) + extracted,
      P.num(before[5]) + over,
    }, ',')
    store(batch_key, expires_at, totals .. '\t' .. ARGV[11])
  end
  return { 'ok', counts }
end

return P.run(main)
