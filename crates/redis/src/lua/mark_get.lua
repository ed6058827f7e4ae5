-- mark_get.lua: the store's mark, read without any expectation (MemoryPool:
-- StoreIdentity::read_mark).
--
-- Reply: {'ok'} (no mark) | {'ok', "identity\tgeneration\tlost_at\thold"}.

local function main()
  local text = P.mark_text()
  if not text then
    return { 'ok' }
  end
  return { 'ok', text }
end

return P.run(main)
