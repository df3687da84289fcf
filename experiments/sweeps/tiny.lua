-- A tiny sweep for trying the engine (and for its tests): two architectures × two learning
-- rates on AR, a few seconds each.  mechlab sweep run experiments/sweeps/tiny.lua --profile smoke
return {
  name = "tiny",
  description = "AR with 2-layer attention and Mamba at width 16",
  base = {
    task = "ar_32", model = { n_layers = 2 }, train_docs = 640, eval_docs = 64, batch_size = 32, steps = 60,
    eval_every = 20, schedule = "cosine", warmup = 0.1, seed = 1,
  },
  grid = {
    arch = { "attention", "mamba" },
    d_model = { 16 },
    lr = { 3e-3, 1e-2 },
  },
  cell = function(c) c.pos_emb = c.arch == "attention" end,
  evaluators = { { kind = "interchange", at = "report", layers = { 1 }, components = { "block_input" } } },
  profiles = {
    smoke = { base = { steps = 20, eval_every = 10 } },
  },
}
