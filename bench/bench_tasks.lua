-- Dataset build times of tasks made in Lua against the built-in ones (docs/tasks.md, "Your own
-- task"; issue targets: a Lua task's 100,032 documents in <= 5x the built-in AR's time, a
-- 100,000-document MQAR set at L = 256 with 16 pairs in <= 2 s).
--   mechlab bench/bench_tasks.lua [n=100032] [rounds=3] [mqar=1]
-- The Lua task is AR written in Lua (mech.task_examples.associative_recall: the layout, vocabulary
-- size and named positions of ar_32, 16 pairs of distinct keys and values, then the query and its
-- answer) in both forms: one document per call (sample) and batches drawn with tensor ops
-- (sample_batch). Times are CPU seconds (one thread; on a busy machine wall time mostly measures
-- the others), the least of `rounds` runs, all in one process.
local o = { n = 100032, rounds = 3, mqar = 1 }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if not (k and o[k]) then error("usage: bench_tasks.lua [n=100032] [rounds=3] [mqar=1]", 0) end
  o[k] = math.tointeger(tonumber(v))
end
local n = o.n

local function best(f)
  local t = math.huge
  for _ = 1, o.rounds do
    collectgarbage()
    local t0 = os.clock()
    f()
    t = math.min(t, os.clock() - t0)
  end
  return t
end

local ar = mech.task.preset("ar_32", 42)
local per_doc = mech.task.load("mech.task_examples", { batched = false }, 42, "associative_recall")
local batched = mech.task.load("mech.task_examples", { batched = true }, 42, "associative_recall")
local t_ar = best(function() return ar:dataset(n, { seed = 1 }) end)
local t_doc = best(function() return per_doc:dataset(n, { seed = 1 }) end)
local t_batch = best(function() return batched:dataset(n, { seed = 1 }) end)
-- the sample functions alone (the rest is checking and storing in C)
local spec = { per_doc = debug.getuservalue(per_doc, 1), batched = debug.getuservalue(batched, 1) }
local s_doc = best(function()
  local gen, sample = mech.Generator(1), spec.per_doc.sample
  for _ = 1, n do sample(gen, "train") end
end)
local s_batch = best(function()
  local gen, sample_batch, left = mech.Generator(1), spec.batched.sample_batch, n
  while left > 0 do left = left - sample_batch(gen, "train", left).tokens:shape()[1] end
end)
print(string.format("%d documents, CPU seconds (least of %d rounds)", n, o.rounds))
print(string.format("  ar_32 (built-in, C)          %6.3f", t_ar))
print(string.format("  AR in Lua, sample            %6.3f  %5.1fx the built-in  (its sample function alone %6.3f)",
  t_doc, t_doc / t_ar, s_doc))
print(string.format("  AR in Lua, sample_batch      %6.3f  %5.1fx the built-in  (its sample_batch alone    %6.3f)",
  t_batch, t_batch / t_ar, s_batch))
print("  target: <= 5x")
if o.mqar ~= 0 then
  local mq = { vocab_size = 8192, input_seq_len = 256, num_kv_pairs = 16 }
  for _, rng in ipairs { "philox", "numpy" } do
    mq.rng = rng
    local t = best(function() return mech.task.mqar(mq):dataset(100000, { seed = 1 }) end)
    print(string.format("MQAR %-7s  100000 docs (L = 256, 16 pairs)  %6.3f s CPU  (target <= 2 s)", rng, t))
  end
end
