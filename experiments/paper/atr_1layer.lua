-- ATR (5, 20) with 1 layer (spec §8.2.6; spec §5.5 suite "ATR 1-layer"): six architectures, five
-- widths, LR5, positions for Attention only, 32 epochs, cosine. 150 runs. The 2-layer models
-- are experiments/paper/atr_easy.lua's. Feeds Fig. 8b.
--   mechlab sweep run experiments/paper/atr_1layer.lua --profile quick
local P = require "mech.paper"

return {
  name = "atr_1layer",
  description = "ATR (5, 20): 6 architectures x 1 layer x 5 widths x LR5",
  base = P.base(P.atr_task("pcfg_5_20"), { model = { n_layers = 1 } }),
  grid = { arch = P.archs, d_model = P.widths, lr = P.lr5, seed = { P.seed } },
  cell = P.pe_for_attention,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the ATR easy quick profile's widths, learning rate and seed, 32 epochs: 12 runs. Reduced to
    -- fit 2 hours: one seed: 2.78 core-hours, projected 1.46 h on 2 cores (`bench/bench_sweep.lua
    -- quick`).
    quick = P.quick(),
    smoke = P.smoke { grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
