-- Dataset build times of tasks made in Lua against the built-in ones (docs/tasks.md, "Your own
-- task"; issue targets: a Lua task's 100,032 documents in <= 5x the built-in AR's time, a
-- 100,000-document MQAR set at L = 256 with 16 pairs in <= 2 s).
--   mechlab bench/bench_tasks.lua [n=100032]
-- The Lua task is AR written in Lua: the layout, vocabulary and named positions of ar_32
-- (16 pairs of distinct keys and values, then the query and its answer).
local n = 100032
for _, a in ipairs(arg or {}) do
  local v = a:match("^n=(%d+)$")
  if not v then error("usage: bench_tasks.lua [n=100032]", 0) end
  n = math.tointeger(tonumber(v))
end

-- CPU seconds (the benchmark is one thread; on a busy machine wall time mostly measures the others)
local function time(f)
  local t0 = os.clock()
  local r = f()
  return os.clock() - t0, r
end

local K = 4096 -- keys k0.. at 3.., values v0.. at 3 + K..
local seen, stamp = {}, 0 -- seen[id] == stamp: id is in the current document (an array, reused)
for id = 1, 2 * K + 4 do seen[id] = 0 end
local function sample_ar(gen)
  -- the document's tokens in place; a (key, value) pair from one draw below K², redrawn while
  -- its key or its value repeats an earlier one (the same law as two draws)
  local t = { 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 2 }
  local below = gen.below
  stamp = stamp + 1
  for i = 1, 16 do
    local k, v
    repeat
      local r = below(gen, K * K)
      k, v = 3 + r // K, 3 + K + r % K
    until seen[k] ~= stamp and seen[v] ~= stamp
    seen[k], seen[v] = stamp, stamp
    t[2 * i], t[2 * i + 1] = k, v
  end
  local q = below(gen, 16)
  t[35], t[36] = t[2 * q + 2], t[2 * q + 3]
  return { tokens = t, targets = { 35 }, positions = { bos = 0, query_item_orig = 2 * q + 1,
    target_item_orig = 2 * q + 2, divider = 33, query_item = 34, target_item = 35, next_key = 2 * q + 3 } }
end
local lua_ar = mech.task.new {
  name = "ar_lua", vocab = 2 * K + 4, corrupt = { 3, 3 + K - 1 }, sample = sample_ar,
  positions = { "bos", "query_item_orig", "target_item_orig", "divider", "query_item", "target_item", "next_key" },
}

local t_ar = time(function() return mech.task.preset("ar_32", 42):dataset(n, { seed = 1 }) end)
local t_lua = time(function() return lua_ar:dataset(n, { seed = 1 }) end)
print(string.format("ar_32 (C)     %d docs  %6.3f s CPU", n, t_ar))
print(string.format("AR in Lua     %d docs  %6.3f s CPU  (%.1fx the built-in; target <= 5x)", n, t_lua, t_lua / t_ar))
local gen, sample = mech.Generator(1), sample_ar
local t_sample = time(function() for _ = 1, n do sample(gen) end end)
print(string.format("  of which its sample function alone %6.3f s (the rest: checking and storing in C)", t_sample))
local mq = { vocab_size = 8192, input_seq_len = 256, num_kv_pairs = 16 }
for _, rng in ipairs { "philox", "numpy" } do
  mq.rng = rng
  local t = time(function() return mech.task.mqar(mq):dataset(100000, { seed = 1 }) end)
  print(string.format("MQAR %-7s  100000 docs (L = 256, 16 pairs)  %6.3f s CPU  (target <= 2 s)", rng, t))
end
