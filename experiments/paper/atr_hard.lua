-- ATR at |Σ| = 8192 and at L_max = 10 (spec §8.2.2, §8.2.5; spec §5.5 suites "ATR 8192" and "ATR
-- medium, PE for all / NoPE"): pcfg_easy_8192 with positions for Attention only (150 runs);
-- pcfg_10_20 with positions for all (150) and without (125: no H3). 2 layers, five widths, LR5, 32
-- epochs, cosine. 425 runs. Feeds Fig. 4a–b and 7.
--   mechlab sweep run experiments/paper/atr_hard.lua --profile quick
local P = require "mech.paper"

local tasks = { P.atr_task("pcfg_easy_8192"), P.atr_task("pcfg_10_20") }

return {
  name = "atr_hard",
  description = "ATR (5, 8192) and (10, 20): 6 architectures x 5 widths x LR5",
  base = P.base(tasks[1]),
  grid = { task = tasks, arch = P.archs, d_model = P.widths, lr = P.lr5, pos_emb = { true, false }, seed = { P.seed } },
  cell = function(c)
    if c.task.preset == "pcfg_easy_8192" and c.pos_emb ~= (c.arch == "attention") then return false end
    if c.task.preset == "pcfg_10_20" and c.arch == "h3" and not c.pos_emb then return false end
  end,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the main curves of both settings at two widths, lr 1e-3: 24 runs. Reduced to fit 2 hours:
    -- one seed, then 5 epochs (15,630 steps) of the paper's 32 (not measured whether the result
    -- survives; pcfg_10_20's long documents make it 4x (5, 20)'s cost a step): 3.76 core-hours,
    -- projected 1.98 h on 2 cores (`bench/bench_sweep.lua quick`; 6 epochs would be 2.4 h).
    quick = P.quick { grid = { pos_emb = { false } }, cell = P.pe_for_attention, base = { epochs = 5 } },
    -- issue 42 (ledger rows 11-13): the quick profile at the paper's 32 epochs (100,032 steps),
    -- 1,024 report documents: 24 runs
    quick32 = P.report_all(P.quick { grid = { pos_emb = { false } }, cell = P.pe_for_attention }),
    -- issue 42 (ledger row "on ATR, NoPE Attention beats PE Attention at small d", Fig. 7's (10, 20)
    -- facet): Attention without positions on (10, 20), the partner of quick32's Attention runs: 2 runs
    nope_pair = P.report_all(P.quick {
      grid = { task = { tasks[2] }, arch = { "attention" }, pos_emb = { false } },
    }),
    smoke = P.smoke {
      grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 }, pos_emb = { false }, seed = { 42 } },
      cell = P.pe_for_attention,
    },
  },
}
