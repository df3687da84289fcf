-- mechlab's default job: train a 2-layer attention model on a reduced AR task, then look inside.
--
-- The reduced task keeps the paper's AR layout (spec §2) with fewer pairs and tokens so it
-- trains in a few minutes on two cores. After training, a hook on layer 1's attention pattern
-- measures where the query position looks: an induction circuit puts its weight on the value
-- that followed the queried key (target_item_orig).
local train = require "mech.train"

local config = {
  model = { arch = "attention", d_model = 64, n_layers = 2, pos_emb = true },
  task = mech.task.ar { num_kv = 32, length = 4 },   -- 16 keys, 16 values, 2 pairs per document
  steps = 6000, batch_size = 32, eval_docs = 320,
  -- a long warm-up: with 10 % the model settles on guessing among the context's values
  lr = 1e-3, schedule = "cosine", warmup = 0.33, eval_every = 1000, seed = 42,
  threads = 1, out = "runs/default",
}
local min_accuracy = 0.95 -- the job fails below it; min_accuracy=0 for a short smoke run
for _, a in ipairs(arg or {}) do -- key=value overrides, e.g. steps=2000 out=/tmp/x
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then error("usage: default.lua [key=value ...]; got '" .. a .. "'") end
  if k == "min_accuracy" then min_accuracy = tonumber(v) or error("min_accuracy= expects a number, got '" .. v .. "'")
  else config[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
end
config.train_docs = config.train_docs or config.batch_size * config.steps -- every document seen once

local pairs = config.task:config().max_length // 2
print(string.format("mechlab %s: 2-layer attention, d_model %d, on AR with %d pairs (V = %d), %d steps",
  mech.version, config.model.d_model, pairs, config.task:vocab_size(), config.steps))
local run = train.run(config)

-- Attention mass of layer 1 from the query position to the named positions.
local ds = config.task:dataset(config.eval_docs, { seed = config.seed, split = "test" })
local mass, n = { target_item_orig = 0, query_item_orig = 0, other = 0 }, 0
for first = 0, #ds - 1, 64 do
  local count = math.min(64, #ds - first)
  local tokens, _, pos = ds:batch(first, count)
  run.model:forward(tokens, {
    ["blocks.1.mixer.pattern"] = function(P)
      for b = 0, count - 1 do
        local q = pos.query_item[b + 1]
        local row = P[{ b, 0, q }]
        local v, k = row:get(pos.target_item_orig[b + 1]), row:get(pos.query_item_orig[b + 1])
        mass.target_item_orig = mass.target_item_orig + v
        mass.query_item_orig = mass.query_item_orig + k
        mass.other = mass.other + (1 - v - k)
        n = n + 1
      end
    end,
  })
end

local f = run.final
print("")
print("results")
print(string.format("  %-44s %s", "test accuracy (argmax over the vocabulary)", string.format("%.4f", f.accuracy)))
print(string.format("  %-44s %.4f", "mean probability of the answer", f.prob))
print(string.format("  %-44s %.4f", "test loss", f.loss))
print(string.format("  %-44s %d in %.1f s (%.0f steps/s)", "training steps", run.steps, run.wall, run.steps_per_second))
print(string.format("  %-44s %d", "parameters", run.model:n_params()))
print("  layer-1 attention from the query position (mean over test documents):")
print(string.format("    %-42s %.3f", "-> the value after the queried key", mass.target_item_orig / n))
print(string.format("    %-42s %.3f", "-> the queried key itself", mass.query_item_orig / n))
print(string.format("    %-42s %.3f", "-> everything else", mass.other / n))
print("  run directory: " .. config.out .. " (manifest.json, metrics.csv, checkpoint.safetensors)")
print("  next: mechlab experiments/interchange.lua " .. config.out .. "/checkpoint.safetensors out.csv")
if f.accuracy < min_accuracy then
  io.stderr:write(string.format("default job: test accuracy %.4f is below %g\n", f.accuracy, min_accuracy))
  os.exit(1)
end
