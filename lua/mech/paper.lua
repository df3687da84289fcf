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

--- The runs of the paper's main curves: Attention with positions, the rest without, plus
--- Attention's NoPE runs at AR's extra learning rates, pooled with its PE runs when the best
--- learning rate is taken (docs/reproduction.md, "Model selection and the filter").
function paper.main_curve(r)
  return r.pos_emb == (r.arch == "attention") or (r.arch == "attention" and r.lr >= 1e-2 and r.task == "ar_32")
end

-- The positions' names in figure titles and axes.
local position_names = { value = "Value", query = "Query", key = "Key", next_key = "Next key" }

-- The names of the layer-1 block-input attributions the paper plots (docs/reproduction.md,
-- "Model selection and the filter").
function paper.attrib_label(position, layer, component)
  local pos = ({ value = "target_item_orig", key = "query_item_orig", query = "query_item" })[position] or position
  return string.format("%d.KEY.query_item_orig.%s.%s", layer or 1, pos, component or "block_input")
end

------------------------------------------------------------------------------------------------
-- Figures in the paper's design (docs/figures.md): Set2 by architecture, log2 widths, accuracy 0-1.05

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

--- Does a sweep's entry of dirs hold results: a sweep directory with its results.csv, or a
--- results CSV itself (the committed report-step rows, docs/results/<sweep>-<profile>.csv)?
function paper.has_results(dir)
  if not dir then return false end
  if dir:match("%.csv$") then return mech.sys.exists(dir) end
  return mech.sys.exists(dir .. "/results.csv")
end

--- The rows of one sweep's results (dirs: {name = a sweep directory or a results CSV}), or none
--- while that sweep has no results yet: a figure draws its other sweeps' panels and leaves these empty.
function paper.results(dirs, name)
  local dir = dirs[name]
  if not paper.has_results(dir) then return {} end
  return sweep.results(dir)
end

--- Which runs passed the 0.01 filter, for rows that carry no filter denominators (the committed
--- report-step rows): {label = {run = true}}, read by paper.use_recorded_filter from a CSV of
--- (sweep, run, position, attrib) rows such as docs/img/reproduction/filter.csv
--- (plots/record_filter.lua). nil: the filter comes from the rows' attrib_den only.
paper.recorded_filter = nil

function paper.use_recorded_filter(file)
  local rec = {}
  for _, r in ipairs(sweep.results(file)) do
    local label = paper.attrib_label(r.position)
    rec[label] = rec[label] or {}
    rec[label][r.run] = true
  end
  paper.recorded_filter = rec
end

-- The runs passing the 0.01 filter at label (layer-1 block input form), from the rows' own
-- denominators (metric_of(row) == label .. ".attrib_den"), else from the recorded filter.
local function filter_pass(rows, label, threshold, metric_of, split)
  local pass = {}
  for _, r in ipairs(rows) do
    if r.step_kind == "report" and r.split == (split or "test") and metric_of(r) == label .. ".attrib_den" and r.value > threshold then
      pass[r.run] = true
    end
  end
  if next(pass) == nil and paper.recorded_filter and paper.recorded_filter[label] and threshold == 0.01 then
    for id in pairs(paper.recorded_filter[label]) do pass[id] = true end
  end
  return pass
end

--- Rows of several sweeps' results.csv, concatenated (names: which).
function paper.rows(dirs, names)
  local all = {}
  for _, n in ipairs(names) do
    for _, r in ipairs(paper.results(dirs, n)) do all[#all + 1] = r end
  end
  return all
end

--- A panel's title, marked when the panel has no rows yet.
function paper.panel_title(title, rows)
  return #rows == 0 and (title .. " (no results yet)") or title
end

local arch_order = {}
for i, a in ipairs(paper.archs) do arch_order[a] = i end
arch_order.delta_net = #paper.archs + 1

-- Architectures in the paper's order, other keys (numbers, strings) in their natural order.
local function key_less(x, y)
  local ox, oy = arch_order[x], arch_order[y]
  if ox or oy then return (ox or 99) < (oy or 99) end
  if type(x) == type(y) then return x < y end
  return type(x) == "number"
end

-- Each architecture's Set2 colour and marker, fixed by the paper's order, so that an architecture
-- looks the same in every figure, whichever others are present.
local arch_markers = { "circle", "triangle", "square", "diamond", "triangle_down", "plus", "cross" }

--- The colour and marker of an architecture (nil for other line keys: the figure's palette).
function paper.arch_style(a)
  local i = arch_order[a]
  if i then return mech.plot.color("set2", i - 1), arch_markers[i] end
end

--- The colour and marker of Mamba's short-conv width k (0 none ... 4 the default): one Blues
--- shade and one marker each, the same in every figure of the conv ablation.
function paper.conv_style(k)
  k = math.tointeger(tonumber(k))
  if k and k >= 0 and k <= 4 then return mech.plot.color("blues", k, 5), arch_markers[k + 1] end
end

--- Sorts a list of architectures (or other line keys) into the paper's order, in place.
function paper.sort_keys(list) table.sort(list, key_less); return list end

--- Accuracy at the best learning rate per (group, width) (docs/reproduction.md, "Model selection
--- and the filter"; with seeds: the lr with the
--- best mean over seeds). rows: sweep.results; opts.where(row) filters rows; opts.group(row) is
--- the line a run belongs to (default its arch). When several selection groups fall on one
--- (line, width), the best mean wins: that is how the AR curves pool Attention's NoPE runs at
--- the extra learning rates with its PE runs.
--- Returns {line = {d = {mean, sd, n, lr, values = {per seed}}}}, the sorted widths and lines.
function paper.best_per_width(rows, opts)
  opts = opts or {}
  local split, kind = opts.split or "test", opts.step_kind or "report"
  local group = opts.group or function(r) return r.arch end
  local keep = {}
  for _, r in ipairs(rows) do if not opts.where or opts.where(r) then keep[#keep + 1] = r end end
  local chosen = sweep.select(keep, { metric = opts.metric or "accuracy", split = split, step_kind = kind, over = { "lr" } })
  local by_run = {}
  for _, r in ipairs(keep) do
    if r.metric == (opts.metric or "accuracy") and r.split == split and r.step_kind == kind then by_run[r.run] = r.value end
  end
  local out, widths, lines, seen_w, seen_l = {}, {}, {}, {}, {}
  for _, c in ipairs(chosen) do
    local g, d = group(c.row), c.row.d_model
    local values = {}
    for _, id in ipairs(c.runs) do values[#values + 1] = by_run[id] end
    local m, sd = mean_sd(values)
    out[g] = out[g] or {}
    if not out[g][d] or m > out[g][d].mean then
      out[g][d] = { mean = m, sd = sd, n = #values, lr = c.over.lr, values = values, runs = c.runs }
    end
    if not seen_w[d] then seen_w[d] = true; widths[#widths + 1] = d end
    if not seen_l[g] then seen_l[g] = true; lines[#lines + 1] = g end
  end
  table.sort(widths)
  table.sort(lines, key_less)
  return out, widths, lines
end

--- "mean ± sd" (or the single value), and the same for a list.
function paper.fmt_mean(values, digits)
  local m, sd = mean_sd(values)
  local f = "%." .. (digits or 3) .. "f"
  if #values > 1 then return string.format(f .. " ± " .. f, m, sd) end
  return string.format(f, m)
end

--- One key line per line of an accuracy figure: "Attention: d=32 0.71 ± 0.12 (lr 0.001, 2 seeds), …".
function paper.accuracy_keys(best, widths, lines, name, prefix)
  local keys = {}
  for _, g in ipairs(lines) do
    local parts = {}
    for _, d in ipairs(widths) do
      local e = best[g][d]
      if e then
        parts[#parts + 1] = string.format("d=%d %s (lr %g%s)", d, paper.fmt_mean(e.values), e.lr,
          e.n > 1 and string.format(", %d seeds", e.n) or "")
      end
    end
    keys[#keys + 1] = (prefix or "") .. (name or paper.arch_name)(g) .. ": " .. table.concat(parts, ", ")
  end
  return keys
end

--- A caption line saying what an accuracy figure selected: the learning rates tried and taken,
--- and the seeds averaged. rows: the rows the figure drew from; best: best_per_width's table.
function paper.selection_caption(rows, best)
  local tried, taken, seeds, run_seed = {}, {}, {}, {}
  for _, r in ipairs(rows) do
    if r.metric == "accuracy" and r.step_kind == "report" then
      tried[r.lr] = true
      run_seed[r.run] = r.seed
    end
  end
  for _, cells in pairs(best) do
    for _, e in pairs(cells) do
      taken[e.lr] = true
      for _, id in ipairs(e.runs) do if run_seed[id] then seeds[run_seed[id]] = true end end
    end
  end
  local function list(set)
    local l = {}
    for v in pairs(set) do l[#l + 1] = v end
    table.sort(l)
    for i, v in ipairs(l) do l[i] = string.format("%g", v) end
    return l
  end
  local lt, lk, ls = list(tried), list(taken), list(seeds)
  local lr = #lt == 1 and ("lr " .. lt[1] .. " (the only one run)")
    or string.format("best lr per cell of %s (taken: %s)", table.concat(lt, ", "), table.concat(lk, ", "))
  local seed = #ls == 1 and ("seed " .. ls[1]) or ("seeds " .. table.concat(ls, ", ") .. ": faded points each seed, line the mean")
  return lr .. "; " .. seed
end

--- The series of one accuracy-versus-width panel: per line, the mean over seeds joined by a path
--- and, where a cell has several seeds, each seed's point (translucent) under it.
function paper.accuracy_series(best, widths, lines, opts)
  opts = opts or {}
  local name = opts.name or paper.arch_name
  local series = {}
  for _, g in ipairs(lines) do
    local x, y, px, py = {}, {}, {}, {}
    for _, d in ipairs(widths) do
      local e = best[g][d]
      if e then
        x[#x + 1], y[#y + 1] = d, e.mean
        if e.n > 1 then for _, v in ipairs(e.values) do px[#px + 1], py[#py + 1] = d, v end end
      end
    end
    local label = (opts.label_prefix or "") .. name(g)
    local color, marker = (opts.style or paper.arch_style)(g)
    local dashed = opts.dashed
    if type(dashed) == "function" then dashed = dashed(g) end
    -- the mean first: the legend shows a label's first series, and the mean is the strong one
    series[#series + 1] = { label = label, key = tostring(g), x = x, y = y, path = true, alpha = 0.9, dashed = dashed,
      color = color, marker = marker }
    if #px > 0 then
      series[#series + 1] = { label = label, key = tostring(g), x = px, y = py, alpha = 0.3, color = color, marker = marker }
    end
  end
  return series
end

--- An accuracy-versus-width figure (log2 widths, 0-1.05) from panels {title =, series =}, or one
--- panel's series.
function paper.draw_accuracy(panels, out, opts)
  opts = opts or {}
  local spec = { logx = 2, xticks = opts.xticks or paper.widths, ylim = { -0.03, 1.05 }, title = opts.title,
    xlabel = "model width d (log scale)", ylabel = opts.ylabel or "accuracy", legend_title = opts.legend_title or "Arch.",
    legend = opts.legend, ncol = opts.ncol, palette = opts.palette, width = opts.width or 420,
    height = opts.height or 340, scale = opts.scale or 2, dodge = opts.dodge, caption = opts.caption, out = out }
  if panels[1] and panels[1].series then spec.facets = panels else spec.series = panels end
  -- the widths present, with a quarter octave either side: room for dodged series at the ends
  local lo, hi = math.huge, -math.huge
  for _, p in ipairs(spec.facets or { { series = panels } }) do
    for _, sr in ipairs(p.series) do
      for _, x in ipairs(sr.x) do lo, hi = math.min(lo, x), math.max(hi, x) end
    end
  end
  if lo <= hi then spec.xlim = { lo / 2 ^ 0.3, hi * 2 ^ 0.3 } end
  mech.plot.scatter(spec)
end

--- The paper's accuracy-versus-width figure: one line per architecture at the best learning rate
--- (every seed's point and their mean). Returns best, widths, lines as best_per_width.
function paper.accuracy_figure(rows, out, opts)
  opts = opts or {}
  local best, widths, lines = paper.best_per_width(rows, opts)
  if opts.selection_caption then -- the learning rates and seeds behind the points, in a caption line
    local keep = {}
    for _, r in ipairs(rows) do if not opts.where or opts.where(r) then keep[#keep + 1] = r end end
    local sel = paper.selection_caption(keep, best)
    opts = setmetatable({ caption = opts.caption and (sel .. "; " .. opts.caption) or sel }, { __index = opts })
  end
  paper.draw_accuracy(paper.accuracy_series(best, widths, lines, opts), out, opts)
  return best, widths, lines
end

--- Accuracy against width by depth: one facet per number of layers, the main curves (positions
--- for Attention only) at the best learning rate. Returns the key lines.
function paper.depth_figure(rows, depths, out, opts)
  local panels, keys = {}, {}
  for _, L in ipairs(depths) do
    local best, widths, archs = paper.best_per_width(rows, {
      where = function(r) return r.n_layers == L and paper.main_curve(r) end })
    panels[#panels + 1] = { title = L == 1 and "1 layer" or (L .. " layers"), series = paper.accuracy_series(best, widths, archs) }
    for _, k in ipairs(paper.accuracy_keys(best, widths, archs, nil, L .. "L ")) do keys[#keys + 1] = k end
  end
  paper.draw_accuracy(panels, out, { title = opts.title, legend = "bottom", width = 220 * #depths + 180, height = 320 })
  return keys
end

--- The Attrib of every run passing the 0.01 filter (docs/reproduction.md, "Model selection and
--- the filter") for one label, by group (default the arch): {group = {values}}, the number of
--- runs, whether the filter applied (when no run passes it, every run is shown), and the sorted
--- groups. opts: where, group, threshold (false:
--- no filter), split.
function paper.attrib_by_group(rows, label, opts)
  opts = opts or {}
  local split = opts.split or "test"
  local group = opts.group or function(r) return r.arch end
  -- the query type in the label (KEY on AR, PARENT or SIBLING on ATR) is read as KEY
  local function metric(r) return (r.metric:gsub("^(%d+)%.%u+%.", "%1.KEY.", 1)) end
  local pass, filtered = nil, opts.threshold ~= false
  if filtered then
    pass = filter_pass(rows, label, opts.threshold or 0.01, metric, split)
    if next(pass) == nil then filtered = false end -- untrained runs (a smoke profile): show them all
  end
  local by, groups, n = {}, {}, 0
  for _, r in ipairs(rows) do
    if r.step_kind == "report" and r.split == split and metric(r) == label .. ".attrib"
        and (not filtered or pass[r.run]) and (not opts.where or opts.where(r)) and r.value == r.value then
      local g = group(r)
      if not by[g] then by[g] = {}; groups[#groups + 1] = g end
      by[g][#by[g] + 1] = r.value
      n = n + 1
    end
  end
  table.sort(groups, key_less)
  return by, n, filtered, groups
end

--- The Attrib at the layer-1 block input of the given runs, one value per run found (AR labels).
function paper.attrib_of_runs(rows, runs, position)
  local want, metric = {}, paper.attrib_label(position) .. ".attrib"
  for _, id in ipairs(runs) do want[id] = true end
  local values = {}
  for _, r in ipairs(rows) do
    if want[r.run] and r.metric == metric and r.step_kind == "report" and r.split == "test" then values[#values + 1] = r.value end
  end
  return values
end

--- Key lines of a scatter: per series, the mean ± sd of both coordinates.
function paper.scatter_keys(series, xname, yname)
  local keys = {}
  for _, sr in ipairs(series) do
    if #sr.x > 0 then
      keys[#keys + 1] = string.format("%s: %s %s, %s %s (%d runs)", sr.label, xname, paper.fmt_mean(sr.x, 2), yname,
        paper.fmt_mean(sr.y, 2), #sr.x)
    end
  end
  return keys
end

--- Mamba's short-conv width (the results leave the default, 4, empty).
function paper.mamba_conv(r) return r.d_conv or 4 end

--- Box-plot facets of Attrib at the layer-1 block input, one facet per (position, setting):
--- settings = {{title =, rows =, where =, split =}}, positions e.g. {"key", "query", "value"};
--- opts.label(position, setting) names the attribution (default: paper.attrib_label(position)).
--- Draws the figure (dashed lines at 0 and 1, free y) and returns key lines (mean ± sd per group)
--- and whether it showed every run because none passed the filter (an empty panel never counts).
function paper.attrib_boxes(settings, positions, out, opts)
  opts = opts or {}
  local name = opts.name or paper.arch_name
  local style = opts.style or paper.arch_style
  local facets, keys, unfiltered = {}, {}, false
  -- the groups with runs in the data, and those drawn somewhere: a group with runs but no point
  -- anywhere (none passes the filter) is named in the caption
  local present, drawn, order, left = {}, {}, {}, {}
  for _, pos in ipairs(positions) do
    for _, st in ipairs(settings) do
      local label = opts.label and opts.label(pos, st) or paper.attrib_label(pos)
      local all = paper.attrib_by_group(st.rows, label, { where = st.where, split = st.split, group = opts.group, threshold = false })
      for g in pairs(all) do
        if not present[g] and (not opts.keep or opts.keep(g)) then present[g] = true; order[#order + 1] = g end
      end
      local by, n, filtered, groups = paper.attrib_by_group(st.rows, label, { where = st.where, split = st.split,
        group = opts.group, threshold = opts.threshold })
      if not filtered and n > 0 and opts.threshold ~= false then unfiltered = true end -- not an empty panel
      local boxes, parts, shown = {}, {}, 0
      for _, g in ipairs(groups) do
        if opts.keep and not opts.keep(g) then left[g] = math.max(left[g] or 0, #by[g]) end
        if not opts.keep or opts.keep(g) then
          drawn[g], shown = true, shown + #by[g]
          -- the key (the CSV's group) stays the name; the tick label may add the run count
          boxes[#boxes + 1] = { label = opts.counts and string.format("%s (%d)", name(g), #by[g]) or name(g), key = name(g),
            values = by[g], color = (style(g)) }
          parts[#parts + 1] = string.format("%s %s (%d)", name(g), paper.fmt_mean(by[g], 2), #by[g])
        end
      end
      local title = "@" .. (position_names[pos] or pos) .. (st.title and ("  " .. st.title) or "")
      facets[#facets + 1] = { title = paper.panel_title(title, st.rows), groups = boxes }
      keys[#keys + 1] = string.format("@%s%s: %d runs; mean ± sd: %s", position_names[pos] or pos,
        st.title and (" " .. st.title) or "", shown, table.concat(parts, ", "))
    end
  end
  local title = opts.title
  if unfiltered then title = (title and title .. " " or "") .. "(no run passes the filter: all shown)" end
  local caption, none = opts.caption, {}
  paper.sort_keys(order)
  for _, g in ipairs(order) do if not drawn[g] then none[#none + 1] = name(g) end end
  if #none > 0 then
    caption = (caption and caption .. "; " or "") .. "no run passes the filter: " .. table.concat(none, ", ")
  end
  local out_groups = {}
  for g in pairs(left) do out_groups[#out_groups + 1] = g end
  paper.sort_keys(out_groups)
  for i, g in ipairs(out_groups) do out_groups[i] = string.format("%s (%d run%s)", name(g), left[g], left[g] == 1 and "" or "s") end
  if #out_groups > 0 then
    caption = (caption and caption .. "; " or "") .. "passing but not drawn: " .. table.concat(out_groups, ", ")
  end
  mech.plot.box { facets = facets, ncol = opts.ncol or #settings, free_y = opts.free_y ~= false, hlines = { 0, 1 },
    ylim = opts.ylim, ylabel = opts.ylabel or "Attrib", title = title, width = opts.width or 200 * #settings + 120,
    height = opts.height or 170 * #positions + 80, scale = opts.scale or 2, caption = caption, alpha = opts.alpha, out = out }
  return keys, unfiltered
end

--- Attrib at two positions of one layer and component, one point per run passing the 0.01
--- filter (docs/reproduction.md, "Model selection and the filter"), coloured and shaped by
--- architecture. Returns the number of points and whether the filter was applied (when no run
--- passes it, every run is shown and the title says so) and the plotted series.
function paper.attrib_scatter(rows, xpos, ypos, out, opts)
  opts = opts or {}
  local layer, comp = opts.layer or 1, opts.component or "block_input"
  local xl, yl = paper.attrib_label(xpos, layer, comp), paper.attrib_label(ypos, layer, comp)
  local pass = filter_pass(rows, xl, 0.01, function(r) return r.metric end)
  local title, filtered = opts.title, true
  if next(pass) == nil then -- untrained runs (a smoke profile): show them all, and say so
    pass = setmetatable({}, { __index = function() return true end })
    title = (title and title .. " " or "") .. "(no run passes the filter: all shown)"
    filtered = false
  end
  -- every architecture with runs is in the legend, passing or not, so that the scatters of one
  -- suite (Fig. 3b and 3c) share one legend
  local pts, archs, seen, total = {}, {}, {}, 0
  for _, r in ipairs(rows) do
    if r.step_kind == "report" and r.split == "test" and (not opts.where or opts.where(r)) and r.metric == xl .. ".attrib" then
      total = total + 1
      if not seen[r.arch] then seen[r.arch] = true; archs[#archs + 1] = r.arch end
    end
    if r.step_kind == "report" and r.split == "test" and pass[r.run] and (not opts.where or opts.where(r)) then
      local p = pts[r.run] or { arch = r.arch }
      pts[r.run] = p
      if r.metric == xl .. ".attrib" then p.x = r.value elseif r.metric == yl .. ".attrib" then p.y = r.value end
    end
  end
  table.sort(archs, key_less)
  local series, n = {}, 0
  for _, a in ipairs(archs) do
    local x, y = {}, {}
    local ids = {}
    for id, p in pairs(pts) do if p.arch == a and p.x and p.y then ids[#ids + 1] = id end end
    table.sort(ids)
    for _, id in ipairs(ids) do x[#x + 1], y[#y + 1] = pts[id].x, pts[id].y end
    n = n + #x
    local color, marker = paper.arch_style(a)
    series[#series + 1] = { label = paper.arch_name(a), key = a, x = x, y = y, color = color, marker = marker }
  end
  -- both axes span at least -0.1 .. 1.1, so that 0 (no effect) and 1 (full restoration) are in
  -- view and a spread of 0.01 does not fill the panel
  local function lim(field)
    local lo, hi = -0.1, 1.1
    for _, s in ipairs(series) do
      for _, v in ipairs(s[field]) do lo, hi = math.min(lo, v - 0.05), math.max(hi, v + 0.05) end
    end
    return { lo, hi }
  end
  -- runs of different architectures often land on one spot (0 or 1): translucent points, each
  -- moved by a few pixels (seeded, so the figure is the same every time)
  local jitter = opts.jitter or 7
  local caption = string.format("%s%d of %d runs %s at %s; points jittered by up to %g px", opts.caption and (opts.caption .. "; ") or "",
    n, total, filtered and "pass the 0.01 filter" or "shown", position_names[xpos] or xpos, jitter)
  mech.plot.scatter { series = series, title = title, xlabel = "Attrib @ " .. (position_names[xpos] or xpos),
    ylabel = "Attrib @ " .. (position_names[ypos] or ypos), legend_title = "Arch.", width = opts.width or 420,
    height = opts.height or 360, scale = opts.scale or 2, xlim = lim("x"), ylim = lim("y"), alpha = 0.35, jitter = jitter,
    seed = 1, caption = caption, out = out }
  return n, filtered, series
end

--- The figures of plots/paper/ (recipe plots/paper/<id>.lua) and the sweeps of
--- experiments/paper/ each needs (a recipe's own `sweeps` must match; tests/lua/test_paper.lua checks).
paper.figures = {
  { id = "fig3a", sweeps = { "ar" } },
  { id = "fig3b", sweeps = { "ar" } },
  { id = "fig3c", sweeps = { "ar" } },
  { id = "fig4a", sweeps = { "atr_easy", "atr_hard" } },
  { id = "fig4b", sweeps = { "atr_easy", "atr_hard" } },
  { id = "fig5a", sweeps = { "atr_split" } },
  { id = "fig5b", sweeps = { "atr_split" } },
  { id = "fig5c", sweeps = { "atr_split" } },
  { id = "fig6a", sweeps = { "ar", "mamba_conv" } },
  { id = "fig6b", sweeps = { "ar", "mamba_conv" } },
  { id = "fig6c", sweeps = { "ar", "based_ablation" } },
  { id = "fig7", sweeps = { "ar", "atr_easy", "atr_hard" } },
  { id = "fig8a", sweeps = { "ar", "ar_layers" } },
  { id = "fig8b", sweeps = { "atr_easy", "atr_1layer" } },
  { id = "fig9a", sweeps = { "ar", "ar_layers" } },
  { id = "fig9b", sweeps = { "ar", "ar_layers" } },
  { id = "fig10", sweeps = { "sibling" } },
  { id = "v3_delta_net", sweeps = { "ar", "delta_net" } },
  { id = "v3_lr_heatmap", sweeps = { "ar" } },
  { id = "v3_atr_mamba_conv", sweeps = { "atr_easy", "atr_mamba_conv" } },
  { id = "v3_next_key", sweeps = { "ar", "mamba_conv" } },
}

--- Is a results row of this preset's task (the task column reads "pcfg_5_20-t42[-numpy]")?
function paper.task_is(r, preset)
  local t = tostring(r.task)
  return t == preset or t:sub(1, #preset + 1) == preset .. "-"
end

--- A recipe run on its own: `mechlab plots/paper/<id>.lua DIR [OUT.png]`, DIR either the entry
--- point's directory (its sweeps under DIR/sweeps/<name>) or, for a one-sweep figure, the sweep's.
function paper.main(recipe, dir, out)
  local dirs = {}
  for _, s in ipairs(recipe.sweeps) do
    dirs[s] = mech.sys.exists(dir .. "/sweeps/" .. s) and (dir .. "/sweeps/" .. s) or dir
  end
  for _, line in ipairs(recipe.draw(dirs, out or (recipe.id .. ".png"))) do print(line) end
end

-- Found as mech.find does: a copy under the working directory first, else the installation's.
local function found(path) return mech.find(path) or path end
function paper.sweep_file(name) return found("experiments/paper/" .. name .. ".lua") end
function paper.recipe_file(id) return found("plots/paper/" .. id .. ".lua") end

--- An ATR task for a sweep: the preset at seed 42 with the original generator's random stream,
--- so that grammars and documents are the paper's own (docs/tasks.md, "Random streams").
function paper.atr_task(preset)
  return { preset = preset, seed = paper.seed, rng = "numpy" }
end

--- The quick profile a suite extends (docs/reproduction.md, "Profiles"): widths 32 and 64, lr
--- 1e-3, one seed (42). over.grid adds or replaces axes (seed = {42, 43} for two seeds); other
--- keys (base, cell) are the profile's own.
function paper.quick(over)
  local p = { grid = { d_model = { 32, 64 }, lr = { 1e-3 }, seed = { paper.seed } } }
  for k, v in pairs(over or {}) do
    if k == "grid" then
      for axis, values in pairs(v) do p.grid[axis] = values end
    else
      p[k] = v
    end
  end
  return p
end

--- The smoke profile every suite shares: a few steps on a few documents (the test suite runs it).
function paper.smoke(over)
  local p = { base = { steps = 20, train_docs = 640, eval_docs = 64, eval_every = 10, checkpoint_every = 10 } }
  for k, v in pairs(over or {}) do p[k] = v end
  return p
end

return paper
