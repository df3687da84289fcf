--- The paper's figure kinds, drawn in its design (docs/figures.md): accuracy against width (log2
--- widths, accuracy 0-1.05, Set2 by architecture), box plots and scatters of Attrib. Part of
--- mech.paper.
local suite = require "mech.paper.suite"
local style = require "mech.paper.style"
local stats = require "mech.paper.stats"
local selection = require "mech.paper.selection"

local draw = {}

--- A panel's title, marked when the panel has no rows yet.
function draw.panel_title(title, rows)
  return #rows == 0 and (title .. " (no results yet)") or title
end

--- The series of one accuracy-versus-width panel: per line, the mean over seeds joined by a path
--- and, where a cell has several seeds, each seed's point (translucent) under it.
function draw.accuracy_series(best, widths, lines, opts)
  opts = opts or {}
  local name = opts.name or style.arch_name
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
    local color, marker = (opts.style or style.arch_style)(g)
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

--- The y range of an accuracy figure: the paper's 0-1.05, unless opts.zoom and every point lies at
--- 0.5 or above, where lines bunched near the top would sit a few pixels apart; then from a tenth
--- below the lowest point (so 0.88-0.96 spans half the axis, not a twelfth). Returns the range
--- and, when zoomed, a note for the caption.
function draw.accuracy_ylim(panels, opts)
  local lo = math.huge
  for _, p in ipairs(panels) do
    for _, sr in ipairs(p.series) do
      for _, y in ipairs(sr.y) do if y == y then lo = math.min(lo, y) end end
    end
  end
  if not (opts and opts.zoom) or lo < 0.5 or lo == math.huge then return { -0.03, 1.05 } end
  local floor = math.floor((lo - 0.03) * 20) / 20
  return { floor, 1.0 + (1.0 - floor) * 0.03 }, string.format("y axis from %g, not 0: the lines lie above %g", floor, floor)
end

--- An accuracy-versus-width figure (log2 widths, 0-1.05) from panels {title =, series =}, or one
--- panel's series.
function draw.draw_accuracy(panels, out, opts)
  opts = opts or {}
  local ylim, ynote = draw.accuracy_ylim(panels[1] and panels[1].series and panels or { { series = panels } }, opts)
  local caption = opts.caption
  if ynote then caption = caption and (caption .. "; " .. ynote) or ynote end
  local spec = { logx = 2, xticks = opts.xticks or suite.widths, ylim = ylim, title = opts.title,
    xlabel = "model width d (log scale)", ylabel = opts.ylabel or "accuracy", legend_title = opts.legend_title or "Arch.",
    legend = opts.legend, ncol = opts.ncol, palette = opts.palette, width = opts.width or 420,
    height = opts.height or 340, scale = opts.scale or 2, dodge = opts.dodge, caption = caption, out = out }
  if panels[1] and panels[1].series then spec.facets = panels else spec.series = panels end
  -- the widths present, with 0.3 octave either side: room for dodged points at the ends
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
function draw.accuracy_figure(rows, out, opts)
  opts = opts or {}
  local best, widths, lines = selection.best_per_width(rows, opts)
  if opts.selection_caption then -- the learning rates and seeds behind the points, in a caption line
    local keep = {}
    for _, r in ipairs(rows) do if not opts.where or opts.where(r) then keep[#keep + 1] = r end end
    local sel = stats.selection_caption(keep, best)
    opts = setmetatable({ caption = opts.caption and (sel .. "; " .. opts.caption) or sel }, { __index = opts })
  end
  draw.draw_accuracy(draw.accuracy_series(best, widths, lines, opts), out, opts)
  return best, widths, lines
end

--- Accuracy against width by depth: one facet per number of layers, the main curves (positions
--- for Attention only) at the best learning rate, overlapping points dodged apart (1-layer Based
--- and BaseConv are one model and coincide); opts.zoom narrows the y axis to the lines (Fig. 10).
--- Returns the key lines.
function draw.depth_figure(rows, depths, out, opts)
  local panels, keys = {}, {}
  for _, L in ipairs(depths) do
    local best, widths, archs = selection.best_per_width(rows, {
      where = function(r) return r.n_layers == L and suite.main_curve(r) end })
    panels[#panels + 1] = { title = L == 1 and "1 layer" or (L .. " layers"), series = draw.accuracy_series(best, widths, archs) }
    for _, k in ipairs(stats.accuracy_keys(best, widths, archs, nil, L .. "L ")) do keys[#keys + 1] = k end
  end
  draw.draw_accuracy(panels, out, { title = opts.title, legend = "bottom", width = 220 * #depths + 180, height = 320,
    dodge = 6, zoom = opts.zoom, caption = "points that would overlap are moved apart along x, centred on their width" })
  return keys
end

--- Box-plot facets of Attrib at the layer-1 block input, one facet per (position, setting):
--- settings = {{title =, rows =, where =, split =}}, positions e.g. {"key", "query", "value"};
--- opts.label(position, setting) names the attribution (default: suite.attrib_label(position)),
--- opts.facet_title(position, setting) titles a facet (default "@Position  setting"), and
--- opts.skip(position, setting) leaves a blank slot where a facet cannot have data (no key line).
--- Each value carries its run's width d (a group of fewer than 5 runs is drawn as points, the
--- width by marker shape, named in the legend).
--- Draws the figure (dashed lines at 0 and 1, free y) and returns key lines (mean ± sd per group)
--- and whether it showed every run because none passed the filter (an empty panel never counts).
function draw.attrib_boxes(settings, positions, out, opts)
  opts = opts or {}
  local name = opts.name or style.arch_name
  local style_of = opts.style or style.arch_style
  local facets, keys, unfiltered = {}, {}, false
  -- the groups with runs in the data, and those drawn somewhere: a group with runs but no point
  -- anywhere (none passes the filter) is named in the caption
  local present, drawn, order, left = {}, {}, {}, {}
  for _, pos in ipairs(positions) do
    for _, st in ipairs(settings) do
      local title = opts.facet_title and opts.facet_title(pos, st)
        or ("@" .. style.position_name(pos) .. (st.title and ("  " .. st.title) or ""))
      if opts.skip and opts.skip(pos, st) then
        facets[#facets + 1] = { blank = true }
        goto next_facet
      end
      local label = opts.label and opts.label(pos, st) or suite.attrib_label(pos)
      local all = selection.attrib_by_group(st.rows, label, { where = st.where, split = st.split, group = opts.group, threshold = false })
      for g in pairs(all) do
        if not present[g] and (not opts.keep or opts.keep(g)) then present[g] = true; order[#order + 1] = g end
      end
      -- each kept value's width, in the order of by[g]: attrib_by_group asks a row's group right
      -- before it keeps the row's value
      local widths_of, inner = {}, opts.group or function(r) return r.arch end
      local function group_and_width(r)
        local g = inner(r)
        widths_of[g] = widths_of[g] or {}
        table.insert(widths_of[g], r.d_model)
        return g
      end
      local by, n, filtered, groups = selection.attrib_by_group(st.rows, label, { where = st.where, split = st.split,
        group = group_and_width, threshold = opts.threshold })
      if not filtered and n > 0 and opts.threshold ~= false then unfiltered = true end -- not an empty panel
      local boxes, parts, shown = {}, {}, 0
      for _, g in ipairs(groups) do
        if opts.keep and not opts.keep(g) then left[g] = math.max(left[g] or 0, #by[g]) end
        if not opts.keep or opts.keep(g) then
          drawn[g], shown = true, shown + #by[g]
          -- the key (the CSV's group) stays the name; the tick label may add the run count
          boxes[#boxes + 1] = { label = opts.counts and string.format("%s (%d)", name(g), #by[g]) or name(g), key = name(g),
            values = by[g], tags = widths_of[g], color = (style_of(g)) }
          parts[#parts + 1] = string.format("%s %s (%d)", name(g), stats.fmt_mean(by[g], 2), #by[g])
        end
      end
      facets[#facets + 1] = { title = draw.panel_title(title, st.rows), groups = boxes }
      keys[#keys + 1] = string.format("%s: %d runs; mean ± sd: %s", title, shown, table.concat(parts, ", "))
      ::next_facet::
    end
  end
  local title = opts.title
  if unfiltered then title = (title and title .. " " or "") .. "(no run passes the filter: all shown)" end
  local caption, none, categories = opts.caption, {}, {}
  style.sort_keys(order)
  for _, g in ipairs(order) do
    if drawn[g] then categories[#categories + 1] = name(g) else none[#none + 1] = name(g) end
  end
  if #none > 0 then
    caption = (caption and caption .. "; " or "") .. "no run passes the filter: " .. table.concat(none, ", ")
  end
  local out_groups = {}
  for g in pairs(left) do out_groups[#out_groups + 1] = g end
  style.sort_keys(out_groups)
  for i, g in ipairs(out_groups) do out_groups[i] = string.format("%s (%d run%s)", name(g), left[g], left[g] == 1 and "" or "s") end
  if #out_groups > 0 then
    caption = (caption and caption .. "; " or "") .. "passing but not drawn: " .. table.concat(out_groups, ", ")
  end
  mech.plot.box { facets = facets, ncol = opts.ncol or #settings, free_y = opts.free_y ~= false, hlines = { 0, 1 },
    ylim = opts.ylim, ylabel = opts.ylabel or "Attrib", title = title, width = opts.width or 200 * #settings + 120,
    height = opts.height or 170 * #positions + 80, scale = opts.scale or 2, caption = caption, alpha = opts.alpha, tag_title = "d",
    categories = #categories > 0 and categories or nil, out = out } -- the paper's order in every panel
  return keys, unfiltered
end

--- Attrib at two positions of one layer and component, one point per run passing the 0.01
--- filter (docs/reproduction.md, "Model selection and the filter"), coloured and shaped by
--- architecture. Returns the number of points and whether the filter was applied (when no run
--- passes it, every run is shown and the title says so) and the plotted series.
function draw.attrib_scatter(rows, xpos, ypos, out, opts)
  opts = opts or {}
  local layer, comp = opts.layer or 1, opts.component or "block_input"
  local xl, yl = suite.attrib_label(xpos, layer, comp), suite.attrib_label(ypos, layer, comp)
  local pass = selection.filter_pass(rows, xl, 0.01, function(r) return r.metric end)
  local title, filtered = opts.title, true
  if next(pass) == nil then -- untrained runs (a smoke profile): show them all, and say so
    pass = setmetatable({}, { __index = function() return true end })
    title = (title and title .. " " or "") .. "(no run passes the filter: all shown)"
    filtered = false
  end
  -- every architecture with runs gets a series; one with no passing run has no points, so the
  -- legend leaves it out and the caption names it
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
  table.sort(archs, style.key_less)
  local series, n, none = {}, 0, {}
  for _, a in ipairs(archs) do
    local x, y = {}, {}
    local ids = {}
    for id, p in pairs(pts) do if p.arch == a and p.x and p.y then ids[#ids + 1] = id end end
    table.sort(ids)
    for _, id in ipairs(ids) do x[#x + 1], y[#y + 1] = pts[id].x, pts[id].y end
    n = n + #x
    if #x == 0 then none[#none + 1] = style.arch_name(a) end
    local color, marker = style.arch_style(a)
    series[#series + 1] = { label = style.arch_name(a), key = a, x = x, y = y, color = color, marker = marker }
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
    n, total, filtered and "pass the 0.01 filter" or "shown", style.position_name(xpos), jitter)
  if #none > 0 then caption = caption .. "; no run passes: " .. table.concat(none, ", ") end
  mech.plot.scatter { series = series, title = title, xlabel = "Attrib @ " .. (style.position_name(xpos)),
    ylabel = "Attrib @ " .. (style.position_name(ypos)), legend_title = "Arch.", width = opts.width or 420,
    height = opts.height or 360, scale = opts.scale or 2, xlim = lim("x"), ylim = lim("y"), alpha = 0.35, jitter = jitter,
    seed = 1, caption = caption, out = out }
  return n, filtered, series
end

--- Fig. 3b and 3c: the AR scatter of Attrib @ xpos against @ ypos at the layer-1 block input, key
--- corrupted, filtered at xpos, the runs of the main curves' embeddings (positions for attention
--- only). Draws it and returns its key lines: how many runs it shows, then mean ± sd per architecture.
function draw.ar_attrib_scatter(rows, xpos, ypos, out)
  local x, y = "@" .. style.position_name(xpos), "@" .. style.position_name(ypos)
  local n, filtered, series = draw.attrib_scatter(rows, xpos, ypos, out, {
    title = "AR, key corrupted, filter " .. x, caption = "layer-1 block input", where = function(r) return r.pos_emb == (r.arch == "attention") end,
  })
  local keys = { string.format(filtered and "%d runs pass the 0.01 filter" or "%d runs shown: none passes the 0.01 filter", n) }
  for _, k in ipairs(stats.scatter_keys(series, x, y)) do keys[#keys + 1] = k end
  return keys
end

return draw
