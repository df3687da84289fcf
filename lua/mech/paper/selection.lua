--- The runs a figure shows: reading a sweep's rows, the best learning rate per (line, width), and
--- the 0.01 filter on Attrib (docs/reproduction.md, "Model selection and the filter"). Part of
--- mech.paper.
local sweep = require "mech.sweep"
local suite = require "mech.paper.suite"
local style = require "mech.paper.style"
local stats = require "mech.paper.stats"

local selection = {}

--- Does a sweep's entry of dirs hold results: a sweep directory with its results.csv, or a
--- results CSV itself (the committed report-step rows, docs/results/<sweep>-<profile>.csv)? A
--- list of such entries (a profile and its slices, experiments/paper.lua) asks of its first.
function selection.has_results(dir)
  if type(dir) == "table" then dir = dir[1] end
  if not dir then return false end
  if dir:match("%.csv$") then return mech.sys.exists(dir) end
  return mech.sys.exists(dir .. "/results.csv")
end

--- The rows of one sweep's results (dirs: {name = a sweep directory or a results CSV, or a list
--- of them}), or none while that sweep has no results yet: a figure draws its other sweeps'
--- panels and leaves these empty. Of a list, each run is read from one entry, the first that has
--- it (a slice that trained a run of the profile again adds nothing), or, given holds (a piece of a
--- metric's name), the first whose rows of that run hold such a metric: `ar`'s quick rows never
--- kept the mixer output, and the slice's second training of those runs did.
function selection.results(dirs, name, holds)
  local dir = dirs[name]
  if not selection.has_results(dir) then return {} end
  if type(dir) ~= "table" then return sweep.results(dir) end
  local entries, from, has = {}, {}, {}
  for i, entry in ipairs(dir) do
    entries[i] = selection.has_results(entry) and sweep.results(entry) or {}
    for _, r in ipairs(entries[i]) do
      local held = holds ~= nil and r.metric:find(holds, 1, true) ~= nil
      if not from[r.run] or (held and not has[r.run] and from[r.run] < i) then from[r.run] = i end
      if held and from[r.run] == i then has[r.run] = true end
    end
  end
  local rows = {}
  for i, list in ipairs(entries) do
    for _, r in ipairs(list) do if from[r.run] == i then rows[#rows + 1] = r end end
  end
  return rows
end

--- Rows of several sweeps' results.csv, concatenated (names: which).
function selection.rows(dirs, names)
  local all = {}
  for _, n in ipairs(names) do
    for _, r in ipairs(selection.results(dirs, n)) do all[#all + 1] = r end
  end
  return all
end

-- a run's cell: what a longer training of the same run keeps (its run id adds the profile's options)
local function cell_of(r)
  return table.concat({ r.task, r.arch, tostring(r.n_layers), tostring(r.d_model), tostring(r.d_conv),
    tostring(r.pos_emb), tostring(r.lr), tostring(r.seed) }, "|")
end

--- Of rows (one sweep's, from several profiles), those where(row) holds, trained for one length:
--- the longest when its runs cover every cell (task, arch, layers, width, d_conv, positions, lr,
--- seed) the rows have, else the shortest. A panel thus never mixes training lengths: `atr_hard`'s
--- quick runs (5 epochs) give way to its quick32 runs (the paper's 32) setting by setting, once
--- all of a setting's runs are in. Returns the rows and their steps (nil: no rows).
function selection.longest_trained(rows, where)
  local cells, lo, hi = {}, nil, nil
  for _, r in ipairs(rows) do
    if not where or where(r) then
      local c = cell_of(r)
      cells[c] = cells[c] or {}
      cells[c][r.steps] = true
      lo, hi = math.min(lo or r.steps, r.steps), math.max(hi or r.steps, r.steps)
    end
  end
  if not lo then return {}, nil end
  local chosen = hi
  for _, at in pairs(cells) do if not at[hi] then chosen = lo; break end end
  local out = {}
  for _, r in ipairs(rows) do
    if (not where or where(r)) and r.steps == chosen then out[#out + 1] = r end
  end
  return out, chosen
end

--- The epochs of a paper run that took steps steps (suite.base: 100,032 documents, batch 32).
function selection.epochs(steps)
  local b = suite.base("atr")
  return math.floor(steps * b.batch_size / b.train_docs + 0.5)
end

--- Fig. 4's three ATR settings, (L_max, |Σ|) = (5, 20) from `atr_easy`'s rows, (5, 8192) and
--- (10, 20) from `atr_hard`'s: {title (with its epochs), setting, preset, rows (the setting's, of
--- one training length: longest_trained), epochs (nil: no rows)} each.
function selection.atr_settings(easy, hard)
  local out = {}
  for _, st in ipairs { { "(5, 20)", "pcfg_5_20", easy }, { "(5, 8192)", "pcfg_easy_8192", hard },
    { "(10, 20)", "pcfg_10_20", hard } } do
    local rows, steps = selection.longest_trained(st[3], function(r) return suite.task_is(r, st[2]) end)
    local epochs = steps and selection.epochs(steps)
    out[#out + 1] = { title = st[1] .. (epochs and string.format(", %d ep.", epochs) or ""), setting = st[1],
      preset = st[2], rows = rows, epochs = epochs }
  end
  return out
end

-- The recorded filter is mech.paper's field `recorded_filter` (callers set and clear it there),
-- read when a filter is taken; mech.paper is loaded by then.
local function recorded_filter() return require("mech.paper").recorded_filter end

--- Reads which runs passed the 0.01 filter, for rows that carry no filter denominators (the
--- committed report-step rows of ar, mamba_conv and atr_easy; atr_hard's and atr_split's carry
--- attrib_den), from a CSV of (sweep, run, position, attrib) rows such as
--- docs/img/reproduction/filter.csv (plots/record_filter.lua), into mech.paper.recorded_filter
--- ({label = {run = true}}; nil: the filter comes from the rows' attrib_den only).
function selection.use_recorded_filter(file)
  local rec = {}
  for _, r in ipairs(sweep.results(file)) do
    local label = suite.attrib_label(r.position)
    rec[label] = rec[label] or {}
    rec[label][r.run] = true
  end
  require("mech.paper").recorded_filter = rec
end

--- The runs passing the 0.01 filter at label (layer-1 block input form), from the rows' own
--- denominators (metric_of(row) == label .. ".attrib_den"); a run whose rows have none, from the
--- recorded filter (rows of several sweeps or slices may mix both).
function selection.filter_pass(rows, label, threshold, metric_of, split)
  local pass, has_den = {}, {}
  for _, r in ipairs(rows) do
    if r.step_kind == "report" and r.split == (split or "test") and metric_of(r) == label .. ".attrib_den" then
      has_den[r.run] = true
      if r.value > threshold then pass[r.run] = true end
    end
  end
  local rec = recorded_filter()
  if rec and rec[label] and threshold == 0.01 then
    for id in pairs(rec[label]) do if not has_den[id] then pass[id] = true end end
  end
  return pass
end

--- Accuracy at the best learning rate per (group, width) (docs/reproduction.md, "Model selection
--- and the filter"; with seeds: the lr with the
--- best mean over seeds). rows: sweep.results; opts.where(row) filters rows; opts.group(row) is
--- the line a run belongs to (default its arch). When several selection groups fall on one
--- (line, width), the best mean wins: that is how the AR curves pool Attention's NoPE runs at
--- the extra learning rates with its PE runs.
--- Returns {line = {d = {mean, sd, n, lr, values = {per seed}}}}, the sorted widths and lines.
function selection.best_per_width(rows, opts)
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
    local m, sd = stats.mean_sd(values)
    out[g] = out[g] or {}
    if not out[g][d] or m > out[g][d].mean then
      out[g][d] = { mean = m, sd = sd, n = #values, lr = c.over.lr, values = values, runs = c.runs }
    end
    if not seen_w[d] then seen_w[d] = true; widths[#widths + 1] = d end
    if not seen_l[g] then seen_l[g] = true; lines[#lines + 1] = g end
  end
  table.sort(widths)
  table.sort(lines, style.key_less)
  return out, widths, lines
end

--- The Attrib of every run passing the 0.01 filter (docs/reproduction.md, "Model selection and
--- the filter") for one label, by group (default the arch): {group = {values}}, the number of
--- runs, whether the filter applied (when no run passes it, every run is shown), and the sorted
--- groups. opts: where, group, threshold (false:
--- no filter), split.
function selection.attrib_by_group(rows, label, opts)
  opts = opts or {}
  local split = opts.split or "test"
  local group = opts.group or function(r) return r.arch end
  -- the query type in the label (KEY on AR, PARENT or SIBLING on ATR) is read as KEY
  local function metric(r) return (r.metric:gsub("^(%d+)%.%u+%.", "%1.KEY.", 1)) end
  local pass, filtered = nil, opts.threshold ~= false
  if filtered then
    pass = selection.filter_pass(rows, label, opts.threshold or 0.01, metric, split)
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
  table.sort(groups, style.key_less)
  return by, n, filtered, groups
end

--- The Attrib at the layer-1 block input of the given runs, one value per run found (AR labels).
function selection.attrib_of_runs(rows, runs, position)
  local want, metric = {}, suite.attrib_label(position) .. ".attrib"
  for _, id in ipairs(runs) do want[id] = true end
  local values = {}
  for _, r in ipairs(rows) do
    if want[r.run] and r.metric == metric and r.step_kind == "report" and r.split == "test" then values[#values + 1] = r.value end
  end
  return values
end

return selection
