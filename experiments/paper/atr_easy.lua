-- ATR easy (spec §8.2.2, §8.2.5; spec §5.5 suites "ATR easy, PE for all / NoPE"): pcfg_5_20, six
-- architectures, 2 layers, five widths, LR5, with and without learned positions, 32 epochs,
-- cosine. 300 runs. Feeds Fig. 4a–b (main curves: Attention with PE, the rest without), 7, 8b.
--   mechlab sweep run experiments/paper/atr_easy.lua --profile quick
local P = require "mech.paper"

return {
  name = "atr_easy",
  description = "ATR (5, 20): 6 architectures x 5 widths x LR5, PE and NoPE",
  base = P.base(P.atr_task("pcfg_5_20")),
  grid = { arch = P.archs, d_model = P.widths, lr = P.lr5, pos_emb = { true, false }, seed = { P.seed } },
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the main curves (Attention with PE, the rest without) at two widths, lr 1e-3 (the AR quick
    -- profile's), the paper's 32 epochs, one seed: 12 runs. Sized at ~95 min on 2 cores from the
    -- grid bench's step times (29.5 ms a step for the six architectures at D = 32, 77.4 ms at
    -- D = 64), which timed the default stream's documents; the sweep's numpy-stream batches are
    -- about twice as long (the first: 73 tokens against 33), and `bench/bench_sweep.lua quick`
    -- projects 5.49 core-hours, 2.89 h on 2 cores. Over 2 hours, kept (its runs were trained
    -- under these ids).
    quick = P.quick { grid = { pos_emb = { false } }, cell = P.pe_for_attention },
    -- issue 42 (ledger row 27, Fig. 7): the other member of every PE/NoPE pair of the quick
    -- profile: Attention without positions, the other five with them: 12 runs
    pe_pairs = P.report_all(P.quick { grid = { pos_emb = { true, false } },
      cell = function(c) if c.pos_emb == (c.arch == "attention") then return false end end }),
    smoke = P.smoke {
      grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 }, pos_emb = { false }, seed = { 42 } },
      cell = P.pe_for_attention,
    },
  },
}
