-- v3: DeltaNet on AR (spec §9.1; spec §5.5 suite "v3: AR with DeltaNet"): 2 layers, five widths,
-- LR5, no positions (spec §10.1: v3 does not say), 16 epochs, cosine. 25 runs. Drawn beside the AR
-- main curves of experiments/paper/ar.lua.
--   mechlab sweep run experiments/paper/delta_net.lua --profile quick
local P = require "mech.paper"

return {
  name = "delta_net",
  description = "AR: DeltaNet x 5 widths x LR5, NoPE",
  base = P.base("ar_32"),
  grid = { arch = { "delta_net" }, d_model = P.widths, lr = P.lr5, pos_emb = { false }, seed = { P.seed } },
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the AR quick profile's widths, learning rate and seeds: 4 runs, 0.74 core-hours, projected
    -- 0.39 h on 2 cores (`bench/bench_sweep.lua quick`)
    quick = P.quick { grid = { seed = { 42, 43 } } },
    smoke = P.smoke { grid = { d_model = { 16 }, lr = { 3e-3 } } },
  },
}
