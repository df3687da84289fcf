-- Based ablations on AR (spec §8.2.4; spec §5.5 suites "Based long-conv ablation" and "Based kernel
-- ablation"): Based and BaseConv with a long conv in every BaseConv layer (50 runs), and Based
-- with BaseConv kernel 1, 2 or 4 (75 runs; kernel 3 is the default Based of
-- experiments/paper/ar.lua). 2 layers, five widths, LR5, no positions, 16 epochs, cosine.
-- 125 runs. Feeds Fig. 6c.
--   mechlab sweep run experiments/paper/based_ablation.lua --profile quick
local P = require "mech.paper"

return {
  name = "based_ablation",
  description = "AR: Based/BaseConv with long convs, Based with kernels 1, 2, 4; 5 widths x LR5, NoPE",
  base = P.base("ar_32"),
  grid = { arch = { "based", "base_conv" }, d_conv = { 1, 2, 4, 3 }, d_model = P.widths, long_only = { false, true },
    lr = P.lr5, pos_emb = { false }, seed = { P.seed } },
  -- long convs: the default kernel only (unused there); kernels: Based only
  cell = function(c)
    if c.long_only then
      if c.d_conv ~= 3 then return false end
    elseif c.arch ~= "based" or c.d_conv == 3 then
      return false
    end
  end,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the AR quick profile's widths, learning rate and seeds: 20 runs, 2.54 core-hours, projected
    -- 1.34 h on 2 cores (`bench/bench_sweep.lua quick`)
    quick = P.quick { grid = { seed = { 42, 43 } } },
    smoke = P.smoke { grid = { arch = { "based" }, d_conv = { 1, 3 }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
