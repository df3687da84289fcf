--- The paper's interchange evaluation from Lua (docs/interventions.md, "The interchange evaluator").
--
--   local ic = require "mech.interchange"
--   local res = ic.evaluate(model, dataset, { layers = {1}, components = {"block_input"} })
--   print(res.by_name["1.KEY.query_item_orig.target_item_orig.block_input.attrib"])
--   ic.write_csv(res, "interchange.csv", step, "test")
--
--   train.run{ ..., evaluators = { ic.evaluator{ every = 1000 } } }  -- during training
--
-- The sweep itself is C (mech.interp.interchange): this file chooses the sites, writes the
-- long-format CSV (step, split, metric, value) and adds the analyses that are cheap in Lua:
-- attention mass between named positions and gradient attribution patching.
local mech = require "mech"
local show = require "mech.show"
local util = require "mech.util"

local ic = {}

ic.components = mech.interp.components -- the paper's six block sites, in order (from the core)

local function fail(fn, msg) error(fn .. ": " .. msg, 3) end

-- The model's sites by full name and by layer and component (model:hook_names() entries).
local function site_index(model)
  local by_name, by_layer = {}, {}
  for _, h in ipairs(model:hook_names()) do
    by_name[h.name] = h
    by_layer[h.layer] = by_layer[h.layer] or {}
    by_layer[h.layer][h.component] = h
  end
  return by_name, by_layer
end

--- The sites of a sweep: explicit `sites`, else components x layers (names the model lacks are
--- skipped, so a MambaBlock gets the first four components), plus every mixer-internal site of
--- those layers with a (B, L, ...) layout when `mixer_sites` is true.
function ic.sites(model, opts)
  local fn = "interchange.sites"
  opts = opts or {}
  local by_name, by_layer = site_index(model)
  if opts.sites then
    for _, s in ipairs(opts.sites) do
      if not by_name[s] then fail(fn, "unknown site '" .. tostring(s) .. "' (model:hook_names() lists them)") end
    end
    return opts.sites
  end
  local n_layers = model:config().n_layers
  local layers = opts.layers or {}
  if not opts.layers then for l = 0, n_layers - 1 do layers[#layers + 1] = l end end
  for _, l in ipairs(layers) do
    if math.type(l) ~= "integer" or l < 0 or l >= n_layers then
      fail(fn, string.format("option 'layers': expected integers in [0, %d), got %s", n_layers, tostring(l)))
    end
  end
  local out = {}
  for _, c in ipairs(opts.components or ic.components) do
    for _, l in ipairs(layers) do
      local h = by_layer[l] and by_layer[l][c]
      if h then out[#out + 1] = h.name end
    end
  end
  if opts.mixer_sites then
    local want = {}
    for _, l in ipairs(layers) do want[l] = true end
    for _, h in ipairs(model:hook_names()) do
      if want[h.layer] and h.component:find("^mixer%.") and h.shape[1] == "B" then
        for d = 2, #h.shape do
          if h.shape[d] == "L" then out[#out + 1] = h.name break end
        end
      end
    end
  end
  return out
end

--- Runs the sweep; returns mech.interp.interchange's table plus `by_name` (metric -> value).
--- opts: components, layers, sites, mixer_sites, label_types, positions, seed, batch, first,
--- count, swap, reference, workers (combinations run at once, each on one thread; default: the
--- machine's cores, at most 8, as the results are the same bits for any number; each worker holds
--- a copy of the model and of the clean run's cache).
function ic.evaluate(model, dataset, opts)
  opts = opts or {}
  local known = { components = 1, layers = 1, sites = 1, mixer_sites = 1, label_types = 1, positions = 1, seed = 1,
    batch = 1, first = 1, count = 1, swap = 1, reference = 1, workers = 1 }
  for k in pairs(opts) do
    if not known[k] then fail("interchange.evaluate", "unknown option '" .. tostring(k) .. "'") end
  end
  local res = mech.interp.interchange(model, dataset, {
    sites = ic.sites(model, opts), label_types = opts.label_types, positions = opts.positions, seed = opts.seed,
    batch = opts.batch, first = opts.first, count = opts.count, swap = opts.swap, reference = opts.reference,
    workers = opts.workers or math.min(mech.sys.cores(), 8),
  })
  res.by_name = {}
  for _, kv in ipairs(res.metrics) do res.by_name[kv[1]] = kv[2] end
  res.passes = {}
  for _, kv in ipairs(res.metrics) do
    local label = kv[1]:match("^(%d+%..+)%.attrib$")
    if label then res.passes[label] = select(2, ic.attrib(res, label)) end
  end
  ic.check_accuracy(res, model, dataset, opts.first or 0, opts.count, "interchange.evaluate")
  return res
end

--- Sets res.accuracy (the model's accuracy on the task's supervised rows of documents [first,
--- first + count)) and res.chance (task:chance(): 1 / the number of answers the task can have);
--- below twice chance, res.warning says the attributions are noise and it goes to stderr.
function ic.check_accuracy(res, model, dataset, first, count, fn)
  count = count or #dataset - first
  local tokens, targets = dataset:batch(first, count)
  local s = model:evaluate(tokens, targets, { precision = "fp32" }) -- as the evaluation itself: fp32
  res.accuracy, res.chance = s.correct / math.max(s.n, 1), dataset:task():chance()
  if res.accuracy < 2 * res.chance then
    res.warning = string.format("the model's accuracy (%.3g) is at chance (%.3g): its attributions are noise",
      res.accuracy, res.chance)
    io.stderr:write(fn, ": warning: ", res.warning, "\n")
  end
end

--- Appends every metric to a metrics CSV (a path, or a mech.sys.metrics writer) at `step`.
function ic.write_csv(res, out, step, split)
  local w, own = out, false
  if type(out) == "string" then w, own = mech.sys.metrics(out), true end
  for _, kv in ipairs(res.metrics) do w:append(step or 0, split or "test", kv[1], kv[2]) end
  if own then w:close() end
end

--- Attribution (Eq. 3, ratio of means) of one label "{layer}.{TYPE}.{label_type}.{position}.{component}",
--- whether it passes the filter mean(original) − mean(corrupted) > threshold (0.01), and its
--- standard error (the evaluation's `attrib_se`).
function ic.attrib(res, label, threshold)
  local layer, rest = label:match("^(%d+)%.(.+)$")
  if not layer then fail("interchange.attrib", "expected a label {layer}.{TYPE}.{label_type}.{position}.{component}") end
  local diff = res.by_name[label .. ".prob_diff"]
  local orig, corr = res.by_name["original." .. rest .. ".restored_prob"], res.by_name["corrupted." .. rest .. ".restored_prob"]
  if not (diff and orig and corr) then fail("interchange.attrib", "no metrics for label '" .. label .. "'") end
  local den = orig - corr
  return diff / den, den > (threshold or 0.01), res.by_name[label .. ".attrib_se"]
end

--- An evaluator for train.run{evaluators = {...}}: runs the sweep on the first eval set every
--- `every` steps and appends its metrics to the run's metrics.csv. Its workers default to the
--- run's threads (a sweep's runs share the cores).
function ic.evaluator(opts)
  opts = opts or {}
  local every = opts.every
  local sweep = {}
  for k, v in pairs(opts) do if k ~= "every" and k ~= "split" and k ~= "on_result" then sweep[k] = v end end
  return {
    every = every,
    fn = function(step, model, ctx)
      sweep.workers = opts.workers or mech.threads()
      for _, e in ipairs(ctx.eval_sets) do
        if not opts.split or e.split == opts.split then
          local res = ic.evaluate(model, e.ds, sweep)
          if ctx.metrics then ic.write_csv(res, ctx.metrics, step, e.split) end
          if opts.on_result then opts.on_result(step, res, e.split) end
          if not opts.split then break end
        end
      end
    end,
  }
end

-- The column of dataset:positions() that a position name of the dataset's task is (its own
-- names included: docs/tasks.md, "Position names").
local function pos_col(dataset, name, fn, what)
  local names = dataset:position_names()
  for i, n in ipairs(names) do if n == name then return i - 1 end end
  fail(fn, string.format("%s: expected a position name of task '%s' (%s), got %s%s", what, dataset:task():name(),
    table.concat(names, ", "), type(name) == "string" and "'" .. name .. "'" or type(name),
    type(name) == "string" and " (did you mean '" .. mech.sys.closest(name, names) .. "'?)" or ""))
end

--- The readout of documents [first, first + n) of a dataset: rows (int32 (n), target_item − 1,
--- where the answer is predicted) and targets (int32 (n), the answers), for
--- mech.interp.patching_map{rows =, targets =}.
function ic.readout(dataset, first, n)
  -- each document's first readout (target_item − 1 for AR and ATR; MQAR's first query; a Lua task's first target)
  local _, tg = dataset:batch(first, n)
  local L, rows, targets = tg:shape()[2], {}, {}
  for b = 0, n - 1 do
    for p = 0, L - 1 do
      local y = tg:get(b, p)
      if y ~= mech.task.IGNORE then rows[b + 1], targets[b + 1] = p, y break end
    end
  end
  return mech.tensor(rows, { dtype = "int32" }), mech.tensor(targets, { dtype = "int32" })
end

--- Clean and corrupted tokens of documents [first, first + n): the item at the named position
--- (default "query_item_orig", the key; "target_item_orig" the value) replaced by the paper's
--- corruption draw (docs/interventions.md, "Corruption") from mech.Generator(seed or 42).
function ic.corrupt(dataset, first, n, opts)
  opts = opts or {}
  local clean = dataset:batch(first, n)
  local pos = dataset:positions(first, n)
  local c = pos_col(dataset, opts.position or "query_item_orig", "ic.corrupt", "option 'position'")
  local lo, hi = dataset:task():corrupt_range()
  local gen = mech.Generator(opts.seed or 42, 7) -- ML_STREAM_INTERP
  local corrupted = clean:clone()
  for b = 0, n - 1 do
    local p = pos:get(b, c)
    if p < 0 then
      fail("ic.corrupt", string.format("document %d has no position '%s' to corrupt", first + b,
        opts.position or "query_item_orig"))
    end
    corrupted:set(mech.interp.corrupt(lo, hi, clean:get(b, p), gen), b, p)
  end
  return clean, corrupted
end

--- Attention mass from a named query position to a named key position, per layer: the mean
--- over documents of the pattern's weight P[t_query, s_key] (summed over heads / averaged over
--- channels for Mamba's implicit attention, whose |α| is normalised per row). Attention uses
--- mixer.pattern, Based mixer.pattern (its normalised linear-attention pattern), Mamba
--- mech.interp.mamba_attention. Returns {[layer] = mass}. The loop is mech.interp.attention_mass.
function ic.attention_mass(model, dataset, opts)
  opts = opts or {}
  return mech.interp.attention_mass(model, dataset, { query = opts.query, key = opts.key, n = opts.n })
end

--- Draws a patching map (values, row_labels, col_labels; threshold with den or dens, filter_note,
--- metric) as a mech.plot.heatmap; cells whose denominator is not above the threshold are hatched.
--- mech.interp.plot_map and map:plot check their options and call this.
function ic.plot_map(map, opts)
  local fn = "mech.interp.plot_map"
  opts = opts or {}
  for _, k in ipairs { "values", "col_labels", "row_labels" } do
    if map[k] == nil then fail(fn, "argument 1 expected a patching map with field '" .. k .. "'") end
  end
  local title = opts.title
  if title == nil then
    title = string.format("Patching map (%s restored)", type(map.metric) == "string" and map.metric or "metric")
  end
  local args = { data = map.values, xlabels = map.col_labels, ylabels = map.row_labels, vmin = opts.vmin or -1,
    vmax = opts.vmax or 1, center = 0, values = true, xlabel = "patched position", colorbar = "attribution",
    out = opts.out, title = title }
  if opts.filter ~= false and type(map.threshold) == "number" then
    local dens = map.dens
    if dens == nil then -- one denominator for every cell
      if not (mech.is_tensor(map.values) and map.values:dim() == 2 and type(map.den) == "number") then
        fail(fn, "argument 1 with a threshold expected a values tensor and 'den' or 'dens'")
      end
      dens = mech.full(map.values:shape(), map.den)
    end
    args.filter = { values = dens, min = map.threshold,
      note = map.filter_note or string.format("fails the filter: clean - corrupted metric <= %.14g", map.threshold) }
  end
  mech.plot.heatmap(args)
end

--- mech.interp.plot_map(map, opts) and map:plot(opts): checks the options, then ic.plot_map.
--- Options xlabels / ylabels are tick labels in place of the map's col_labels / row_labels, drawn
--- from a shallow copy of the map so the map itself keeps its own.
function ic.checked_plot_map(...)
  local fn, map, opts = "mech.interp.plot_map", ...
  local function bad(msg) error(fn .. ": " .. msg, 0) end
  for i, v in ipairs({ map == nil and 0 or map, opts == nil and 0 or opts }) do
    if type(v) ~= "table" then
      bad(("argument %d expected a table, got %s"):format(i, select("#", ...) < i and "no value" or show.value(select(i, ...))))
    end
  end
  for k in next, opts do
    if type(k) ~= "string" then bad("option table keys must be strings, got " .. type(k)) end
  end
  local unknown = util.unknown_option(opts, { "out", "title", "filter", "vmin", "vmax", "xlabels", "ylabels" })
  if unknown then bad(unknown) end
  for _, o in ipairs({ { "vmin", "number" }, { "vmax", "number" }, { "filter", "boolean" }, { "title", "string" } }) do
    if opts[o[1]] ~= nil and type(opts[o[1]]) ~= o[2] then
      bad(("option '%s': expected a %s, got %s"):format(o[1], o[2], type(opts[o[1]])))
    end
  end
  for _, lab in ipairs({ { "xlabels", "col_labels", "column" }, { "ylabels", "row_labels", "row" } }) do
    local given = opts[lab[1]]
    if given ~= nil then
      local want = type(map[lab[2]]) == "table" and rawlen(map[lab[2]]) or -1
      local ok = type(given) == "table" and rawlen(given) == want
      for i = 1, ok and want or 0 do
        ok = ok and (type(rawget(given, i)) == "string" or type(rawget(given, i)) == "number")
      end
      if not ok then
        bad(("option '%s': expected a list of %d labels (one per %s), got %s"):format(lab[1], want, lab[3], type(given)))
      end
      local copy = {}
      for k, v in next, map do copy[k] = v end
      copy[lab[2]], map = given, copy
    end
  end
  return ic.plot_map(map, opts)
end

--- The TYPE of a task's metric labels (its first enabled query type for ATR).
function ic.type_name(task)
  local c, kind = task:config(), task:kind()
  if kind == "ar" then return c.query_type == "value" and "VALUE" or "KEY" end
  if kind ~= "atr" then return "KEY" end -- MQAR; a task made outside C (its documents' default type)
  return c.parent and "PARENT" or c.child and "CHILD" or "SIBLING"
end

-- Pearson's r of the estimates against real patching's prob_diff, over the labels both have.
local function correlation(estimates, by_name)
  local xs, ys = {}, {}
  for label, est in pairs(estimates) do
    local real = by_name[label .. ".prob_diff"]
    if real then xs[#xs + 1], ys[#ys + 1] = est, real end
  end
  local m = #xs
  local mx, my = 0, 0
  for i = 1, m do mx, my = mx + xs[i], my + ys[i] end
  mx, my = mx / math.max(m, 1), my / math.max(m, 1)
  local sxy, sxx, syy = 0, 0, 0
  for i = 1, m do
    sxy = sxy + (xs[i] - mx) * (ys[i] - my)
    sxx, syy = sxx + (xs[i] - mx) ^ 2, syy + (ys[i] - my) ^ 2
  end
  return (sxx > 0 and syy > 0) and sxy / math.sqrt(sxx * syy) or 0 / 0, m
end

--- Gradient attribution patching (activation x gradient): estimates every (site, position)
--- prob_diff of the sweep from one corrupted run and one backward pass per label type, and
--- reports its agreement with real patching (`real`: a result of ic.evaluate on the same
--- documents). Returns {estimates = {[label] = mean estimate}, correlation = r, n = pairs}.
--- The runs and sums are mech.interp.attribution_patching; this names the labels.
function ic.attribution_patching(model, dataset, opts)
  opts = opts or {}
  local task = dataset:task()
  local positions = opts.positions
  if not positions and task:kind() ~= "ar" and task:kind() ~= "atr" and task:kind() ~= "mqar" then
    positions = task:config().positions -- a task made outside C: what it declares, its own names included
  elseif not positions then
    positions = { "query_item_orig", "target_item_orig", "query_item", "target_item", "divider" }
    if task:kind() == "ar" then positions[#positions + 1] = "next_key" end
  end
  local list = mech.interp.attribution_patching(model, dataset, { sites = ic.sites(model, opts),
    label_types = opts.label_types, positions = positions, seed = opts.seed, n = opts.n })
  local estimates, type_name = {}, ic.type_name(task)
  for _, e in ipairs(list) do
    local label = string.format("%d.%s.%s.%s.%s", e.layer, type_name, e.label_type, e.position, e.component)
    estimates[label] = e.estimate
  end
  local out = { estimates = estimates }
  if opts.real then out.correlation, out.n = correlation(estimates, opts.real.by_name) end
  return out
end

return ic
