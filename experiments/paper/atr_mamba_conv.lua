-- v3: Mamba conv ablation on ATR (spec §9.3; spec §5.5 suite "v3: ATR Mamba conv ablation"):
-- pcfg_5_20, Mamba with d_conv 0, 1, 2, 3, 2 layers, five widths, LR7, no positions and cosine
-- (spec §10.3: v3 does not say; as in the AR ablation), 32 epochs. 140 runs; d_conv 4 is the Mamba
-- of experiments/paper/atr_easy.lua. The expected signature: high Attrib @ Value without the conv.
--   mechlab sweep run experiments/paper/atr_mamba_conv.lua --profile quick
local P = require "mech.paper"

return {
  name = "atr_mamba_conv",
  description = "ATR (5, 20): Mamba with d_conv 0-3 x 5 widths x LR7, NoPE",
  base = P.base(P.atr_task("pcfg_5_20")),
  grid = { arch = { "mamba" }, d_conv = { 0, 1, 2, 3 }, d_model = P.widths, lr = P.lr7, pos_emb = { false },
    seed = { P.seed } },
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the ATR easy quick profile's widths, learning rate and seed, 32 epochs: 8 runs. Reduced to
    -- fit 2 hours: one seed: 3.63 core-hours, projected 1.91 h on 2 cores (`bench/bench_sweep.lua
    -- quick`).
    quick = P.quick(),
    smoke = P.smoke { grid = { d_conv = { 0, 2 }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
