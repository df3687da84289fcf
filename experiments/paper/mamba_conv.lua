-- Mamba conv ablation on AR (spec §8.2.4; spec §5.5 suite "Mamba conv ablation"): Mamba with d_conv
-- 0 (no short conv), 1, 2 and 3, 2 layers, five widths, LR7, no positions, 16 epochs, cosine. 140
-- runs; d_conv 4 is the default Mamba of experiments/paper/ar.lua. Feeds Fig. 6a–b.
--   mechlab sweep run experiments/paper/mamba_conv.lua --profile quick
local P = require "mech.paper"

return {
  name = "mamba_conv",
  description = "AR: Mamba with d_conv 0-3 x 5 widths x LR7, NoPE",
  base = P.base("ar_32"),
  grid = { arch = { "mamba" }, d_conv = { 0, 1, 2, 3 }, d_model = P.widths, lr = P.lr7, pos_emb = { false },
    seed = { P.seed } },
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the AR quick profile's widths, learning rate and seeds (its Mamba is d_conv 4): 16 runs,
    -- 2.45 core-hours, projected 1.29 h on 2 cores (`bench/bench_sweep.lua quick`)
    quick = P.quick { grid = { seed = { 42, 43 } } },
    -- the same at Mamba's best rate in the AR learning-rate slice (3e-3 at d = 32 and 64, d_conv 4),
    -- seed 42, so that the d_conv ordering is judged there too (issue 28): 8 runs
    best_lr = P.quick { grid = { lr = { 3e-3 } } },
    -- issue 42: d_conv 2 and 3 at the paper's d = 128 and 256 (its d_conv 2 dip at d = 128), at
    -- the slice's best rate, 1,024 report documents: 4 runs
    best_lr_wide = P.report_all(P.quick { grid = { d_conv = { 2, 3 }, d_model = { 128, 256 }, lr = { 3e-3 } } }),
    smoke = P.smoke { grid = { d_conv = { 0, 2 }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
