-- A mixer written in Lua tensor ops (experiments/own_mixer.lua's gated linear attention) against
-- the built-in Based (a fused C kernel): CPU milliseconds per training step of the paper's LM on
-- AR (ar_32: D = 64, 2 layers, batch 32, L = 37, V = 8196), one thread, side by side in one run.
-- Both are mech.model's C language model with mech.adamw (model:train_step); only the mixer
-- differs. Then the paper's interchange evaluation of two Lua mixers beside the built-in ones
-- they resemble (ic.evaluate on 320 test documents, every layer, component, label type and
-- position) with the default workers: wall time per combination, and whether the Lua mixers'
-- numbers are the same for 1, 2 and 3 workers. Prints numbers and asserts nothing (the machine
-- may be busy).
--   build/mechlab bench/bench_lua_mixer.lua [steps=20]
local S = dofile(mech.find("bench/ar_setting.lua"))(arg, "bench_lua_mixer.lua")
local D, NL, B, V, ds = S.D, S.NL, S.B, S.V, S.ds

local models = {
  { label = "based (C)", model = mech.model { arch = "based", d_model = D, n_layers = NL, vocab = V, seed = 1 } },
  { label = "gla (Lua)", model = mech.model { mixer = "experiments.own_mixer", d_model = D, n_layers = NL, vocab = V,
    seed = 1 } },
}
for _, e in ipairs(models) do e.opt = mech.adamw(e.model) end

local function time(e)
  return S.ms_per_step(function(i)
    local tokens, targets = ds:batch(B * (i % 64), B)
    return e.model:train_step(e.opt, tokens, targets, 1e-3).loss
  end)
end
-- alternate to share the machine's noise fairly; keep each one's best round
for _, e in ipairs(models) do e.ms = math.huge end
for _ = 1, 2 do
  for _, e in ipairs(models) do e.ms = math.min(e.ms, time(e)) end
end
local base = models[1].ms
print(string.format("D=%d B=%d L=37 V=%d, 1 thread, %d steps:", D, B, V, S.steps))
for _, e in ipairs(models) do
  print(string.format("  %-10s %8d params  %7.2f ms/step  %.2fx", e.label, e.model:n_params(), e.ms, e.ms / base))
end

-- the interchange evaluation, default workers (min(cores, 8)), wall time per combination (the
-- models' site counts differ): the best of 2 rounds. Pairs of a Lua mixer and the built-in mixer
-- it resembles: GLA and Based (linear attention), tests/new_user/rglru.lua's RG-LRU (a gated
-- recurrence, a Lua loop over time) and Mamba.
local ic = require "mech.interchange"
package.path = assert(mech.find("tests/new_user/rglru.lua")):gsub("rglru%.lua$", "?.lua") .. ";" .. package.path
require "rglru"
local ic_models = { models[1], models[2],
  { label = "mamba (C)", model = mech.model { arch = "mamba", d_model = D, n_layers = NL, vocab = V, seed = 1 } },
  { label = "rglru (Lua)", model = mech.model { mixer = "rglru", d_model = D, n_layers = NL, vocab = V, seed = 1 } } }
local test = S.task:dataset(320, { seed = 42, split = "test" })
local function evaluate(e, workers)
  local t0 = mech.sys.time()
  local res = ic.evaluate(e.model, test, { workers = workers })
  return (mech.sys.time() - t0) / res.n_combos, res
end
for _, e in ipairs(ic_models) do e.ic = math.huge end
for _ = 1, 2 do
  for _, e in ipairs(ic_models) do
    local t, res = evaluate(e)
    e.ic, e.res = math.min(e.ic, t), res
  end
end
print(string.format("interchange evaluation, 320 documents, %d workers (wall per combination):", math.min(mech.sys.cores(), 8)))
for i, e in ipairs(ic_models) do
  local base = ic_models[i - (i + 1) % 2]
  print(string.format("  %-11s %4d combinations %7.1f ms  %.2fx", e.label, e.res.n_combos, e.ic * 1000, e.ic / base.ic))
end
for _, e in ipairs { ic_models[2], ic_models[4] } do
  local same = true
  for _, w in ipairs { 1, 2, 3 } do
    local _, r = evaluate(e, w)
    for k, v in pairs(r.by_name) do
      if e.res.by_name[k] ~= v and v == v then same = false end
    end
  end
  print(string.format("  %s's metrics with 1, 2 and 3 workers: %s", e.label, same and "identical" or "DIFFERENT"))
end
