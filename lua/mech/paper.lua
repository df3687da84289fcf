--- The paper's constants (spec: docs/reproduction.md, "The suites"), shared by the sweep files
--- under experiments/paper/ and the figure recipes under plots/paper/.
local paper = {}

paper.widths = { 16, 32, 64, 128, 256 }
paper.lr5 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3 }
paper.lr7 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2 }
paper.extra_lrs = { 1e-2, 3e-2 }
paper.archs = { "attention", "hyena", "base_conv", "based", "h3", "mamba" }
paper.seed = 42

-- AR (16 epochs of 100,032 documents: T = 50,016, reported at 50,000) and ATR (32 epochs:
-- T = 100,032, reported at 100,000). Evaluation on 320 documents every 200 steps.
function paper.base(task, over)
  local b = {
    task = task, model = { n_layers = 2 }, train_docs = 100032, batch_size = 32, eval_docs = 320, eval_batch = 64,
    epochs = task == "ar_32" and 16 or 32, schedule = "cosine", warmup = 0.1, eval_every = 200, seed = paper.seed,
    checkpoint_every = 1000,
  }
  for k, v in pairs(over or {}) do b[k] = v end
  return b
end

-- The interchange evaluation the figures read: the key corrupted (label query_item_orig), every
-- component and layer, at the reported step.
paper.interchange = { kind = "interchange", at = "report", label_types = { "query_item_orig" } }

-- Learned positions for Attention only (the paper's intent, and its main curves).
function paper.pe_for_attention(c)
  c.pos_emb = c.arch == "attention"
end

-- The names of the layer-1 block-input attributions the paper plots (spec §6.7).
function paper.attrib_label(position, layer, component)
  local pos = ({ value = "target_item_orig", key = "query_item_orig", query = "query_item" })[position] or position
  return string.format("%d.KEY.query_item_orig.%s.%s", layer or 1, pos, component or "block_input")
end

------------------------------------------------------------------------------------------------
-- Figures (spec: the paper's §7.1 design: Set2 by architecture, log2 widths, accuracy 0-1.05)

local sweep = require "mech.sweep"

local arch_names = { attention = "Attention", hyena = "Hyena", base_conv = "BaseConv", based = "Based", h3 = "H3",
  mamba = "Mamba", delta_net = "DeltaNet" }
paper.arch_name = function(a) return arch_names[a] or a end

local function mean_sd(list)
  local n, sum = #list, 0
  for _, v in ipairs(list) do sum = sum + v end
  local mean, ss = sum / n, 0
  for _, v in ipairs(list) do ss = ss + (v - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(ss / (n - 1)) or 0
end
paper.mean_sd = mean_sd

--- Accuracy at the best learning rate per (architecture, width) (spec §5.6, with seeds: the lr
--- with the best mean over seeds). rows: sweep.results; where(row) filters rows (optional).
--- Returns {arch = {d = {mean, sd, n, lr, values = {per seed}}}} and the sorted widths and archs.
function paper.best_per_width(rows, opts)
  opts = opts or {}
  local keep = {}
  for _, r in ipairs(rows) do if not opts.where or opts.where(r) then keep[#keep + 1] = r end end
  local chosen = sweep.select(keep, { metric = "accuracy", split = opts.split or "test",
    step_kind = opts.step_kind or "report", over = { "lr" } })
  local by_run = {}
  for _, r in ipairs(keep) do
    if r.metric == "accuracy" and r.split == (opts.split or "test") and r.step_kind == (opts.step_kind or "report") then
      by_run[r.run] = r.value
    end
  end
  local out, widths, archs, seen_w, seen_a = {}, {}, {}, {}, {}
  for _, c in ipairs(chosen) do
    local a, d = c.row.arch, c.row.d_model
    local values = {}
    for _, id in ipairs(c.runs) do values[#values + 1] = by_run[id] end
    local m, sd = mean_sd(values)
    out[a] = out[a] or {}
    out[a][d] = { mean = m, sd = sd, n = #values, lr = c.over.lr, values = values }
    if not seen_w[d] then seen_w[d] = true; widths[#widths + 1] = d end
    if not seen_a[a] then seen_a[a] = true; archs[#archs + 1] = a end
  end
  table.sort(widths)
  local order = {}
  for i, a in ipairs(paper.archs) do order[a] = i end
  order.delta_net = #paper.archs + 1
  table.sort(archs, function(x, y) return (order[x] or 99) < (order[y] or 99) end)
  return out, widths, archs
end

--- The paper's accuracy-versus-width figure: one line per architecture, the mean over seeds at
--- the best learning rate (the returned table holds each seed's value and the sd).
function paper.accuracy_figure(rows, out, opts)
  opts = opts or {}
  local best, widths, archs = paper.best_per_width(rows, opts)
  local series = {}
  for _, a in ipairs(archs) do
    local x, y = {}, {}
    for _, d in ipairs(widths) do
      local e = best[a][d]
      if e then x[#x + 1], y[#y + 1] = d, e.mean end
    end
    series[#series + 1] = { label = opts.label and opts.label(a) or paper.arch_name(a), key = a, x = x, y = y }
  end
  mech.plot.lines { series = series, logx = 2, xticks = widths, ylim = { 0, 1.05 }, title = opts.title,
    xlabel = "model width d", ylabel = opts.ylabel or "accuracy", legend_title = opts.legend_title or "Arch.",
    palette = opts.palette, width = opts.width or 420, height = opts.height or 340, scale = opts.scale or 2, out = out }
  return best, widths, archs
end

--- Attrib at two positions of one layer and component, one point per run passing the 0.01
--- filter (spec §6.7), coloured and shaped by architecture. Returns the number of points and
--- whether the filter was applied (when no run passes it, every run is shown and the title says so).
function paper.attrib_scatter(rows, xpos, ypos, out, opts)
  opts = opts or {}
  local layer, comp = opts.layer or 1, opts.component or "block_input"
  local xl, yl = paper.attrib_label(xpos, layer, comp), paper.attrib_label(ypos, layer, comp)
  local pass = sweep.filter(rows, xl, 0.01)
  local title, filtered = opts.title, true
  if next(pass) == nil then -- untrained runs (a smoke profile): show them all, and say so
    pass = setmetatable({}, { __index = function() return true end })
    title = (title and title .. " " or "") .. "(no run passes the filter: all shown)"
    filtered = false
  end
  local pts, archs, seen = {}, {}, {}
  for _, r in ipairs(rows) do
    if r.step_kind == "report" and r.split == "test" and pass[r.run] and (not opts.where or opts.where(r)) then
      local p = pts[r.run] or { arch = r.arch }
      pts[r.run] = p
      if r.metric == xl .. ".attrib" then p.x = r.value elseif r.metric == yl .. ".attrib" then p.y = r.value end
      if not seen[r.arch] then seen[r.arch] = true; archs[#archs + 1] = r.arch end
    end
  end
  local order = {}
  for i, a in ipairs(paper.archs) do order[a] = i end
  table.sort(archs, function(a, b) return (order[a] or 99) < (order[b] or 99) end)
  local series, n = {}, 0
  for _, a in ipairs(archs) do
    local x, y = {}, {}
    local ids = {}
    for id, p in pairs(pts) do if p.arch == a and p.x and p.y then ids[#ids + 1] = id end end
    table.sort(ids)
    for _, id in ipairs(ids) do x[#x + 1], y[#y + 1] = pts[id].x, pts[id].y end
    n = n + #x
    series[#series + 1] = { label = paper.arch_name(a), key = a, x = x, y = y }
  end
  local cap = { value = "Value", query = "Query", key = "Key" }
  mech.plot.scatter { series = series, title = title, xlabel = "Attrib @ " .. (cap[xpos] or xpos),
    ylabel = "Attrib @ " .. (cap[ypos] or ypos), legend_title = "Arch.", width = opts.width or 420,
    height = opts.height or 340, scale = opts.scale or 2, out = out }
  return n, filtered
end

--- The recipes of plots/paper/ by figure name, and the sweep each needs.
paper.figures = {
  { id = "fig3a", sweeps = { "ar" } },
  { id = "fig3b", sweeps = { "ar" } },
  { id = "fig3c", sweeps = { "ar" } },
}

return paper
