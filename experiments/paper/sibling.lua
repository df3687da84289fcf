-- Sibling queries (spec §8.2.8; spec §5.5 suite "Sibling 1/2/3-layer"): the sibling preset, six
-- architectures, 1, 2 and 3 layers, five widths, LR5, positions for Attention only, 32 epochs,
-- linear decay. 450 runs. Feeds Fig. 10.
--   mechlab sweep run experiments/paper/sibling.lua --profile quick
local P = require "mech.paper"

return {
  name = "sibling",
  description = "ATR sibling queries: 6 architectures x 1-3 layers x 5 widths x LR5",
  base = P.base(P.atr_task("sibling"), { schedule = "linear" }),
  grid = { arch = P.archs, n_layers = { 1, 2, 3 }, d_model = P.widths, lr = P.lr5, seed = { P.seed } },
  cell = P.pe_for_attention,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- two widths, lr 1e-3: 36 runs. Reduced to fit 2 hours: one seed, then 7 epochs (21,882
    -- steps) of the paper's 32 (not measured whether the result survives): 3.41 core-hours,
    -- projected 1.79 h on 2 cores (`bench/bench_sweep.lua quick`; 8 epochs would be 2.05 h).
    quick = P.quick { base = { epochs = 7 } },
    smoke = P.smoke { grid = { arch = { "mamba" }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
