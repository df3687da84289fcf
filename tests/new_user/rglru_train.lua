-- Trains the RG-LRU mixer (rglru.lua, found beside this script) on a small AR and saves it in run/.
require "rglru"
local train = require "mech.train"
local run = train.run { model = { mixer = "rglru", d_model = 16, n_layers = 2 },
  task = mech.task.ar { num_kv = 8, min_length = 4, max_length = 8 }:spec(), train_docs = 128, eval_docs = 32,
  batch_size = 16, steps = 40, eval_every = 20, lr = 3e-3, out = "run", quiet = true }
print("trained", run.status, run.steps_per_second > 0)
local tok = run.task:dataset(16, { seed = 9, split = "test" }):batch(0, 4)
print("logits", string.format("%.9g", run.model:forward(tok):sum():item()))
