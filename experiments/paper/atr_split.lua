-- ATR split (spec §8.2.3; spec §5.5 suite "ATR split"): pcfg_tts (20% of the (target, query) label
-- pairs held out for test), six architectures, 2 layers, five widths, LR5, positions for
-- Attention only, 32 epochs, linear decay; evaluated and intervened on dev and test. 150 runs.
-- Feeds Fig. 5a–c.
--   mechlab sweep run experiments/paper/atr_split.lua --profile quick
local P = require "mech.paper"

local both = {}
for _, split in ipairs { "dev", "test" } do
  local ev = {}
  for k, v in pairs(P.interchange) do ev[k] = v end
  ev.split = split
  both[#both + 1] = ev
end

return {
  name = "atr_split",
  description = "ATR split (pcfg_tts): 6 architectures x 5 widths x LR5, dev and test",
  base = P.base(P.atr_task("pcfg_tts"), { schedule = "linear", eval_splits = { "dev", "test" } }),
  grid = { arch = P.archs, d_model = P.widths, lr = P.lr5, seed = { P.seed } },
  cell = P.pe_for_attention,
  evaluators = both,
  select = { metric = "accuracy", split = "dev", over = { "lr" } },
  profiles = {
    paper = {},
    -- two widths, lr 1e-3, 32 epochs: 12 runs. Reduced to fit 2 hours: one seed: 2.63 core-hours,
    -- projected 1.39 h on 2 cores (`bench/bench_sweep.lua quick`).
    quick = P.quick(),
    smoke = P.smoke { grid = { arch = { "attention", "mamba" }, d_model = { 16 }, lr = { 3e-3 }, seed = { 42 } } },
  },
}
