-- Mamba without its short convolution on ATR (spec §9.3): with the convolution Mamba
-- retrieves directly at the last state; without it, does it learn attention-like induction?
-- Trains `mamba_without_conv` (d_conv 0, NoPE) on pcfg_5_20, runs the paper's interchange sweep
-- during training and on the final model, and draws the figures.
--   mechlab experiments/mamba_no_conv_atr.lua [d_model=64] [lr=1e-3] [epochs=32] [steps=N]
--                                             [arch=mamba_without_conv] [out=runs/mamba_no_conv_atr]
local train = require "mech.train"
local ic = require "mech.interchange"

local opts = { d_model = 64, lr = 1e-3, epochs = 32, steps = false, arch = "mamba_without_conv",
  out = "runs/mamba_no_conv_atr", task = "pcfg_5_20", threads = 1 }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then error("mamba_no_conv_atr.lua: unknown argument '" .. a .. "'") end
  opts[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
end

-- 1. training, with the sweep every 1000 steps (spec §5.4) into metrics.csv
local run = train.run {
  model = { arch = opts.arch, d_model = opts.d_model, n_layers = 2, pos_emb = false },
  task = opts.task, train_docs = 100032, eval_docs = 320, batch_size = 32,
  epochs = opts.epochs, steps = opts.steps or nil, lr = opts.lr, schedule = "cosine", warmup = 0.1,
  eval_every = 200, seed = 42, out = opts.out, threads = opts.threads,
  evaluators = { ic.evaluator { every = 1000, layers = { 0, 1 } } },
}

-- 2. the sweep on the final model (every site, mixer-internal ones included)
local ds = run.task:dataset(320, { seed = 42, split = "test" })
local res = ic.evaluate(run.model, ds, { mixer_sites = true })
ic.write_csv(res, opts.out .. "/interchange.csv", run.steps, "test")

-- 3. figures: attribution of every (layer, component) at every patch position, key corrupted
local components = { "block_input", "attention_input", "attention_output", "block_output" }
local positions = { "query_item_orig", "target_item_orig", "divider", "query_item", "target_item" }
local rows, data = {}, {}
for layer = 0, run.model:config().n_layers - 1 do
  for _, comp in ipairs(components) do
    rows[#rows + 1] = string.format("layer %d %s", layer, comp)
    local row = {}
    for _, pos in ipairs(positions) do
      local ok, a = pcall(ic.attrib, res, string.format("%d.PARENT.query_item_orig.%s.%s", layer, pos, comp))
      row[#row + 1] = ok and a or 0 / 0
    end
    data[#data + 1] = row
  end
end
mech.plot.heatmap {
  data = data, ylabels = rows, xlabels = { "key", "value", "divider", "query", "answer" }, center = 0, vmin = -1, vmax = 1,
  values = true, title = string.format("%s on ATR: attribution, key corrupted", opts.arch),
  xlabel = "patched position", colorbar = "Attrib", out = opts.out .. "/attribution_map.png",
}

-- Fig. 3-style summary: layer-1 block input at value / query / key
local bars, names = {}, {}
for _, p in ipairs { { "target_item_orig", "@value" }, { "query_item", "@query" }, { "query_item_orig", "@key" } } do
  local ok, a = pcall(ic.attrib, res, "1.PARENT.query_item_orig." .. p[1] .. ".block_input")
  names[#names + 1], bars[#bars + 1] = p[2], ok and a or 0
end
mech.plot.bar { categories = names, series = { { label = opts.arch, values = bars } },
  title = "layer-1 block input attribution", ylabel = "Attrib", out = opts.out .. "/attribution_layer1.png" }

local mass = ic.attention_mass(run.model, ds, { query = "query_item", key = "target_item_orig" })
print(string.format("%s on %s: test accuracy %.4f after %d steps (%.0f s)", opts.arch, opts.task, run.final.accuracy,
  run.steps, run.wall))
for i, n in ipairs(names) do print(string.format("  Attrib %-7s %7.3f", n, bars[i])) end
for l, m in pairs(mass) do print(string.format("  implicit attention mass, layer %d, query -> value: %.3f", l, m)) end
print("  figures and CSVs in " .. opts.out)
