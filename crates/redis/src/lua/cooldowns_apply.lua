-- cooldowns_apply.lua: merges a batch of cooldown changes (MemoryPool:
-- memory/cooldown.rs, CooldownStore::apply_cooldowns; the rule is core's merge_cooldowns).
--
-- ARGV[4] most entries per proxy and scope, ARGV[5] most project scopes per proxy
-- (beside the shared one), then 7-tuples from ARGV[6]: proxy id, op
-- ('s' = set, 'c' = clear), domain, until, strikes, forget_at (these three '' for a
-- clear), project ('' = shared).
-- Changes on a proxy that is not live are ignored and counted.
-- Reply: {'ok', applied, unknown}. Work bound: the batch (at most 10,000) plus cleanup.

local function main()
  P.remove_expired(CLEANUP)
  local max = P.num(ARGV[4])
  local max_scopes = P.num(ARGV[5])
  -- Grouped per proxy in the batch's order: a set then a clear of one domain clears.
  local order, per_proxy = {}, {}
  for i = 6, #ARGV, 7 do
    local id = ARGV[i]
    local list = per_proxy[id]
    if not list then
      list = {}
      per_proxy[id] = list
      order[#order + 1] = id
    end
    list[#list + 1] = { ARGV[i + 1], ARGV[i + 2], P.num(ARGV[i + 3]), P.num(ARGV[i + 4]), P.num(ARGV[i + 5]), ARGV[i + 6] }
  end
  local applied, unknown = 0, 0
  for _, id in ipairs(order) do
    local changes = per_proxy[id]
    local r = P.live_record(id)
    if r then
      local merged = P.merge_cooldowns(P.remembered_cooldowns(id), changes, max, max_scopes)
      P.put_cooldowns(id, merged, P.num(r[HARD]))
      applied = applied + #changes
    else
      unknown = unknown + #changes
    end
  end
  return { 'ok', applied, unknown }
end

return P.run(main)
