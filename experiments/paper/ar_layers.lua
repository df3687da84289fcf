-- AR with 1 and 3 layers (spec §8.2.6, §8.2.7; spec §5.5 suites "AR 1-layer", "AR 3-layer"): six
-- architectures, five widths, LR7, positions for Attention only, 16 epochs, cosine. 420 runs.
-- The 2-layer models are experiments/paper/ar.lua's. Feeds Fig. 8a, 9a, 9b (the mixer output at
-- the query in every layer).
--   mechlab sweep run experiments/paper/ar_layers.lua --profile quick
local P = require "mech.paper"

return {
  name = "ar_layers",
  description = "AR: 6 architectures x 1 and 3 layers x 5 widths x LR7",
  base = P.base("ar_32"),
  grid = { arch = P.archs, n_layers = { 1, 3 }, d_model = P.widths, lr = P.lr7, seed = { P.seed } },
  cell = P.pe_for_attention,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the AR quick profile's widths and learning rate: 24 runs. Reduced to fit 2 hours: one seed,
    -- then 15 epochs (46,890 steps) of the paper's 16 (not measured whether the result survives;
    -- 8 epochs did not for 2-layer Attention at d = 32, see ar.lua): 3.76 core-hours, projected
    -- 1.98 h on 2 cores (`bench/bench_sweep.lua quick`; 16 epochs would be 2.1 h).
    quick = P.quick { base = { epochs = 15 } },
    -- issue 42 (ledger row 30): 3-layer Based at 2-layer Based's best rates in the AR slice (3e-3
    -- at d = 32, 1e-2 at d = 64; both rates at both widths, so 3 layers get a best of two as well),
    -- the paper's 16 epochs, 1,024 report documents: 4 runs
    based_best_lr = P.report_all(P.quick { grid = { arch = { "based" }, n_layers = { 3 }, lr = { 3e-3, 1e-2 } } }),
    smoke = P.smoke { grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 } } },
  },
}
