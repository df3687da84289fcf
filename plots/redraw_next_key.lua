-- Redraws the two v3 next-key figures of docs/reproduction.md from their committed CSVs, in the
-- look of their recipes (plots/paper/v3_next_key.lua, experiments/mamba_next_key.lua).
--
-- Both were drawn from the Mamba runs' report checkpoints at layer 0, which the committed
-- report-step rows do not hold (docs/results/*.csv carry the layer-1 block input only) and whose
-- run directories are gone; what is committed of them is the plotted numbers: v3_next_key.csv one
-- value per run passing the filter (panel, group, value), mamba_next_key.csv the mean per cell.
-- The kernels with Mamba runs come from the committed rows, so that a kernel with none passing
-- the filter is named. mamba_next_key.csv keeps no run counts: its labels cannot carry them.
--   mechlab plots/redraw_next_key.lua [DIR]      (DIR: docs/img/reproduction, rewritten in place)
local sweep = require "mech.sweep"
local paper = require "mech.paper"

local dir = (...) or "docs/img/reproduction"
local results = { "docs/results/ar-quick.csv", "docs/results/mamba-conv-quick.csv" }

-- the kernels with Mamba runs (no positions) in the committed rows
local kernels = {}
for _, file in ipairs(results) do
  for _, r in ipairs(sweep.results(file)) do
    if r.arch == "mamba" and not r.pos_emb then kernels[paper.mamba_conv(r)] = true end
  end
end

------------------------------------------------------------------------------------------------
-- v3_next_key: box plots per (position, site) panel, one group per kernel

local panels, by = {}, {}
for _, r in ipairs(sweep.results(dir .. "/v3_next_key.csv")) do
  if not by[r.panel] then by[r.panel] = {}; panels[#panels + 1] = r.panel end
  local k = tonumber(r.group:match("%d+"))
  by[r.panel][k] = by[r.panel][k] or {}
  table.insert(by[r.panel][k], r.value)
end
local facets, drawn = {}, {}
for _, title in ipairs(panels) do
  local ks = {}
  for k in pairs(by[title]) do ks[#ks + 1] = k end
  table.sort(ks)
  local groups = {}
  for _, k in ipairs(ks) do
    drawn[k] = true
    groups[#groups + 1] = { label = string.format("conv %d (%d)", k, #by[title][k]), key = "conv " .. k,
      values = by[title][k], color = (paper.conv_style(k)) }
  end
  facets[#facets + 1] = { title = title, groups = groups }
end
local none = {}
for k in pairs(kernels) do if not drawn[k] then none[#none + 1] = k end end
table.sort(none)
for i, k in ipairs(none) do none[i] = "conv " .. k end
local caption = "runs passing the 0.01 filter at the panel's site (n per kernel); fewer than 5 runs: their points"
if #none > 0 then caption = caption .. "; no run passes the filter: " .. table.concat(none, ", ") end
mech.plot.box { facets = facets, ncol = 2, free_y = true, hlines = { 0, 1 }, ylabel = "Attrib",
  title = "Mamba, AR, key corrupted, layer 0", width = 560, height = 820, scale = 2, alpha = 0.6, caption = caption,
  out = dir .. "/v3_next_key.png" }
print(dir .. "/v3_next_key.png: " .. #facets .. " panels; " .. caption)

------------------------------------------------------------------------------------------------
-- mamba_next_key: the means per (site; kernel, position), missing cells hatched and explained

local cells, rows, cols = {}, {}, {}
local nr, nc = 0, 0
for _, r in ipairs(sweep.results(dir .. "/mamba_next_key.csv")) do
  rows[r.row + 1], cols[r.col + 1] = r.ylabel, r.xlabel
  nr, nc = math.max(nr, r.row + 1), math.max(nc, r.col + 1)
  cells[r.row * 100000 + r.col] = r.value
end
local data, mask, extreme = {}, {}, 0
for i = 1, nr do
  data[i], mask[i] = {}, {}
  for j = 1, nc do
    local v = cells[(i - 1) * 100000 + (j - 1)]
    v = type(v) == "number" and v or 0 / 0
    data[i][j], mask[i][j] = v, v ~= v
    if v == v then extreme = math.max(extreme, math.abs(v)) end
  end
end
-- the colour scale spans the data, symmetric about 0, rounded up to a tenth
local span = math.max(1, math.ceil(extreme * 10 - 1e-9) / 10)
mech.plot.heatmap { data = data, xlabels = cols, ylabels = rows, center = 0, vmin = -span, vmax = span, values = true,
  digits = 2, mask = mask, mask_note = "no run passes the 0.01 filter at this site and position",
  title = "Mamba, AR, layer 0: Attrib (key corrupted), mean over the runs passing the filter", colorbar = "Attrib",
  out = dir .. "/mamba_next_key.png" }
print(string.format("%s/mamba_next_key.png: %d x %d cells, colour scale ±%g", dir, nr, nc, span))
