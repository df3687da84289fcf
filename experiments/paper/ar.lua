-- AR (spec §8.2.1, §8.2.5; spec §5.5 suites "AR, PE for all", "AR, NoPE", "AR, extra LRs"): six
-- architectures, 2 layers, five widths, with and without learned positions, LR5, plus the two
-- extra learning rates without positions (Attention too). 360 runs. Feeds Fig. 3a–c, 6a, 7.
--   mechlab sweep run experiments/paper/ar.lua --profile quick
local P = require "mech.paper"

-- Each architecture's best learning rate in the slice at d = 64 (docs/reproduction.md, "AR at four
-- learning rates": the largest width it trained), for the paper-width runs of issue 42.
local best_lr = { attention = 3e-4, hyena = 3e-4, base_conv = 1e-3, based = 1e-2, h3 = 3e-3, mamba = 3e-3 }

-- Every architecture at `widths`, each at its best rate (Attention with positions, the rest
-- without), 1,024 report documents; Mamba at d = 256 is the `mamba_256` run already trained.
-- `precision` ("bf16"): an axis of one value (train.run's `precision`), absent for fp32 so that
-- the fp32 profiles keep their run ids.
local function at_best_lr(widths, precision)
  return P.report_all {
    grid = { arch = P.archs, d_model = widths, lr = { 3e-4, 1e-3, 3e-3, 1e-2 }, pos_emb = { false }, seed = { P.seed },
      precision = precision and { precision } or nil },
    cell = function(c)
      if c.lr ~= best_lr[c.arch] or (c.arch == "mamba" and c.d_model == 256) then return false end
      P.pe_for_attention(c)
    end,
  }
end

return {
  name = "ar",
  description = "AR: 6 architectures x 5 widths x LR7, PE and NoPE (the paper's 360 runs)",
  base = P.base("ar_32"),
  grid = { arch = P.archs, d_model = P.widths, lr = P.lr7, pos_emb = { true, false }, seed = { P.seed } },
  -- the extra learning rates were run without positions only
  cell = function(c) if c.pos_emb and c.lr >= 1e-2 then return false end end,
  evaluators = { P.interchange },
  select = { metric = "accuracy", split = "test", over = { "lr" } },
  profiles = {
    paper = {},
    -- the main curves only (Attention with PE, the rest without), two widths, one learning rate,
    -- two seeds, the paper's 16 epochs: 24 runs. Half the epochs does not keep the result:
    -- Attention at d = 32, lr 1e-3 was still learning when its schedule ran out (test accuracy
    -- 0.71 and 0.46 for seeds 42 and 43 at 25,008 steps; it needs ~14,000 steps to start), and
    -- lr 3e-3 failed (0.03) for both seeds. 4.37 core-hours, projected 2.30 h on 2 cores
    -- (`bench/bench_sweep.lua quick`): over 2 hours, kept (two seeds are required, and its runs
    -- were trained under these ids).
    quick = P.quick { grid = { pos_emb = { false }, seed = { 42, 43 } }, cell = P.pe_for_attention },
    -- the learning-rate slice (issue 28): the quick profile's main curves at four learning rates,
    -- one seed, so that Fig. 3a takes the best LR as the paper does and the v3 LR heatmap has
    -- columns: 48 runs.
    lr_slice = P.quick { grid = { pos_emb = { false }, lr = { 3e-4, 1e-3, 3e-3, 1e-2 } }, cell = P.pe_for_attention },
    -- Mamba at the paper's d = 256 at its best learning rate in the slice at d = 64 (3e-3: test
    -- accuracy 0.819, against 0.716 at 1e-2, 0.255 at 1e-3 and 0.006 at 3e-4), one run, to set
    -- beside the paper's ≈ 91 % (issue 28)
    mamba_256 = P.quick { grid = { arch = { "mamba" }, d_model = { 256 }, lr = { 3e-3 }, pos_emb = { false } } },
    -- Attention without positions at the quick profile's widths, rate and first seed: 2 runs, the
    -- other member of Fig. 7's AR pair and the paper's "Attention fails AR without positions"
    -- (appendix D.1)
    nope = P.quick { grid = { arch = { "attention" }, pos_emb = { false } } },
    -- issue 42 (ledger row 27, Fig. 7): the other member of every AR PE/NoPE pair at the quick
    -- widths, rate and first seed: the five architectures other than Attention with positions
    -- (Attention's pair is the quick and `nope` runs): 10 runs
    pe_pairs = P.report_all(P.quick { grid = { arch = { "hyena", "base_conv", "based", "h3", "mamba" },
      pos_emb = { true } } }),
    -- issue 42: the paper's widths, each architecture at its best rate of the slice: d = 128 (6 runs)
    -- and d = 256 (5 runs), two profiles so that d = 128, which settles more ledger rows for its
    -- cost, runs first (docs/reproduction.md, "Background compute (issue 42)")
    best_lr_128 = at_best_lr { 128 },
    best_lr_256 = at_best_lr { 256 },
    -- issue 46, point 5: the AR slice's best rates at d = 64 (the rates above), trained with bf16
    -- products (model option `precision`), 1,024 report documents: 6 runs to set beside the fp32
    -- runs of `lr_slice` at the same (arch, d, lr) (docs/kernels.md, "bf16 training")
    bf16_64 = at_best_lr({ 64 }, "bf16"),
    -- issue 46: Mamba at d = 64, lr 3e-3 is the slice's most seed-sensitive cell, and its bf16 run
    -- retrieved at the query where the fp32 run retrieved at the key. Three more seeds in each
    -- precision (6 runs) tell the precision's effect from the seed's.
    mamba_seeds_64 = P.report_all(P.quick { grid = { arch = { "mamba" }, d_model = { 64 }, lr = { 3e-3 },
      pos_emb = { false }, seed = { 43, 44, 45 }, precision = { "fp32", "bf16" } } }),
    smoke = {
      grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 }, pos_emb = { false }, seed = { 42 } },
      cell = P.pe_for_attention,
      base = { steps = 20, train_docs = 640, eval_docs = 64, eval_every = 10, checkpoint_every = 10 },
    },
  },
}
