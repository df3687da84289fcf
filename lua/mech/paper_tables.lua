--- docs/reproduction.md's tables of numbers, generated from committed data: the report-step rows
--- of each quick sweep (docs/results/*.csv) and, where the rows lack what a table needs, the CSVs
--- of the figures the page shows (docs/img/reproduction/*.csv). Each table sits on the page between
--- `<!-- table: ID -->` and `<!-- end table -->`; the prose around it is left alone.
---   mechlab experiments/paper.lua --tables           rewrites the tables in docs/reproduction.md
---   mechlab experiments/paper.lua --tables --check   lists the tables that differ from the data
--- The rows of ar, mamba_conv, based_ablation and atr_easy carry no filter denominators
--- (attrib_den), so which of their runs pass the paper's 0.01 filter at a position is read from the
--- figure that plotted them (Fig. 3b: the value, Fig. 3c: the query,
--- Fig. 4b and 6b: each position): each plotted point is matched to its run by its values
--- (9 significant digits, as the figure CSVs are written), and the table takes the run's rows.
--- atr_hard's rows carry them; its filter is theirs, and Fig. 4b must plot exactly the runs it passes.
local sweep = require "mech.sweep"
local paper = require "mech.paper"

local T = {}

-- the report-step rows of each sweep, by sweep name
T.results = { ar = "ar-quick.csv", mamba_conv = "mamba-conv-quick.csv", based_ablation = "based-ablation-quick.csv",
  atr_easy = "atr-easy-quick.csv", atr_hard = "atr-hard-quick.csv", atr_split = "atr-split-quick.csv",
  delta_net = "delta-net-quick.csv", ar_lr_slice = "ar-lr-slice.csv", ar_mamba_256 = "ar-mamba-256.csv",
  mamba_conv_best_lr = "mamba-conv-best-lr.csv", atr_mamba_conv = "atr-mamba-conv-quick.csv",
  ar_layers = "ar-layers-quick.csv", atr_1layer = "atr-1layer-quick.csv", sibling = "sibling-quick.csv",
  ar_nope = "ar-nope.csv" }
-- the learning rates of AR's quick profile (1e-3) and its slice (the other three), and the slice's own runs
T.lrs = { 3e-4, 1e-3, 3e-3, 1e-2 }
T.slice_runs = 36
-- the figure CSVs read for the filter and for sites the rows do not hold
T.filter_csv = "docs/img/reproduction/filter.csv"
T.figure_csvs = { "fig3b", "fig3c", "fig4b", "fig6b", "v3_next_key", "mamba_next_key", "mamba_next_key_best_lr_runs",
  "v3_atr_mamba_conv" }

local function fail(msg) error("paper_tables: " .. msg, 0) end

-- the two settings of `atr_hard`, as Fig. 4 titles them
T.hard_settings = { { preset = "pcfg_easy_8192", title = "(5, 8192)" }, { preset = "pcfg_10_20", title = "(10, 20)" } }

-- does a run pass the paper's 0.01 filter at a position, by its own denominator (nil: not recorded)
local function passes_at(e, pos)
  local den = e and e[pos .. "_den"]
  if den == nil then return nil end
  return den > 0.01
end

--- The data the tables are made from, under root (the repository; default "."):
--- {runs = {sweep = {by id}}, ids = {sweep = {ids in file order}}, rows = {sweep = {report rows}},
--- fig = {id = rows}}. A run's entry
--- has its test accuracy and Attrib (value, query, key) and, where the rows carry them, the filter
--- denominators (value_den, query_den, key_den; the later sweeps' rows have them) and its task;
--- the same on the dev split, where a sweep evaluates it (the ATR split), in entry.dev; and the
--- Attrib of the mixer output at the query per layer, where the rows hold it (mixer[layer] and
--- mixer_den[layer]). A sweep whose file is not there has not run: it has no runs (nor has a
--- figure whose CSV is not there any points).
function T.load(root)
  root = root or "."
  local d = { runs = {}, ids = {}, rows = {}, fig = {} }
  local pos_of = { target_item_orig = "value", query_item = "query", query_item_orig = "key" }
  for name, file in pairs(T.results) do
    local runs, ids, rows = {}, {}, {}
    local path = root .. "/docs/results/" .. file
    for _, r in ipairs(mech.sys.exists(path) and sweep.results(path) or {}) do
      if r.step_kind == "report" and (r.split == "test" or r.split == "dev") then
        rows[#rows + 1] = r
        local e = runs[r.run]
        if not e then
          e = { id = r.run, arch = r.arch, d = r.d_model, d_conv = r.d_conv, seed = r.seed, lr = r.lr, pos_emb = r.pos_emb,
            n_layers = r.n_layers, long = r.run:find("long_only=true", 1, true) ~= nil, task = r.task, mixer = {}, mixer_den = {} }
          runs[r.run], ids[#ids + 1] = e, r.run
        end
        if r.split == "dev" then e.dev = e.dev or {} end
        local t = r.split == "dev" and e.dev or e
        -- the query type (KEY on AR, PARENT on ATR) does not matter here
        local p, what = r.metric:match("^1%.%u+%.query_item_orig%.([%w_]+)%.block_input%.(attrib[_den]*)$")
        local layer, mixer = r.metric:match("^(%d)%.%u+%.query_item_orig%.query_item%.attention_output%.(attrib[_den]*)$")
        if r.metric == "accuracy" then t.accuracy = r.value
        elseif p and pos_of[p] and what == "attrib" then t[pos_of[p]] = r.value
        elseif p and pos_of[p] and what == "attrib_den" then t[pos_of[p] .. "_den"] = r.value
        elseif layer and r.split == "test" then
          e[mixer == "attrib" and "mixer" or "mixer_den"][tonumber(layer)] = r.value
        end
      end
    end
    d.runs[name], d.ids[name], d.rows[name] = runs, ids, rows
  end
  for _, id in ipairs(T.figure_csvs) do
    local path = root .. "/docs/img/reproduction/" .. id .. ".csv"
    d.fig[id] = mech.sys.exists(path) and sweep.results(path) or {}
  end
  -- the slice trained the quick profile's runs at lr 1e-3, seed 42 again (the same ids): the
  -- quick rows stand, as in the figures (mech.paper's selection.results); the second training is
  -- kept for comparison in d.retrained, and as a sweep of its own, "retrained" (its rows hold
  -- the mixer output that the quick rows lack)
  d.retrained, d.runs.retrained, d.ids.retrained = {}, {}, {}
  local ids = {}
  for _, id in ipairs(d.ids.ar_lr_slice) do
    if d.runs.ar[id] then
      d.retrained[#d.retrained + 1] = { quick = d.runs.ar[id], slice = d.runs.ar_lr_slice[id] }
      d.runs.retrained[id], d.ids.retrained[#d.ids.retrained + 1] = d.runs.ar_lr_slice[id], id
    else ids[#ids + 1] = id end
  end
  d.ids.ar_lr_slice = ids
  return d
end

------------------------------------------------------------------------------------------------
-- numbers

local function g9(v) return string.format("%.9g", v) end

-- a number as the page writes it (a true minus sign)
local function num(v, digits)
  return (string.format("%." .. (digits or 2) .. "f", v):gsub("^%-", "−"))
end

local function mean_of(values) return (paper.mean_sd(values)) end

-- "mean ± sd" (several values), the value (one) or "–" (none)
local function ms(values, digits)
  if #values == 0 then return "–" end
  local m, sd = paper.mean_sd(values)
  if #values == 1 then return num(m, digits) end
  return num(m, digits) .. " ± " .. num(sd, digits)
end

-- the runs of one or more sweeps that satisfy where(run), in file order
local function pick(d, names, where)
  local out = {}
  for _, n in ipairs(names) do
    for _, id in ipairs(d.ids[n]) do
      local e = d.runs[n][id]
      if not where or where(e) then out[#out + 1] = e end
    end
  end
  return out
end

local function field(list, key)
  local v = {}
  for _, e in ipairs(list) do if e[key] ~= nil then v[#v + 1] = e[key] end end
  return v
end

--- The runs a figure plotted: each point {where = function(run), values = {position = value}}
--- is matched to the first run not yet taken that satisfies where and has those values (at the
--- figure CSV's 9 significant digits). A point no run matches is an error: the rows and the
--- figure disagree.
local function match(candidates, points, what)
  local taken, out = {}, {}
  for _, p in ipairs(points) do
    local found
    for _, e in ipairs(candidates) do
      if not taken[e] and p.where(e) then
        local ok = true
        for pos, v in pairs(p.values) do
          if e[pos] == nil or g9(e[pos]) ~= g9(v) then ok = false; break end
        end
        if ok then found = e; break end
      end
    end
    if not found then
      local parts = {}
      for pos, v in pairs(p.values) do parts[#parts + 1] = pos .. " " .. g9(v) end
      table.sort(parts)
      fail(string.format("%s: the point (%s, %s) matches no run of the committed rows", what, p.label,
        table.concat(parts, ", ")))
    end
    taken[found] = true
    out[#out + 1] = found
  end
  return out
end

local function arch_is(a) return function(e) return e.arch == a end end
local arch_by_name = {}
for _, a in ipairs(paper.archs) do arch_by_name[paper.arch_name(a)] = a end

-- an architecture as the tables' first column names it: Attention's main curve has positions
local function arch_label(a) return paper.arch_name(a) .. (a == "attention" and " (PE)" or "") end

local function of_arch(list, a)
  local out = {}
  for _, e in ipairs(list) do if e.arch == a then out[#out + 1] = e end end
  return out
end

-- the filtered runs of a scatter figure (x: the position whose filter it applies; y: the other)
local function scatter_runs(d, fig, sweeps, xpos, ypos)
  local points = {}
  for _, r in ipairs(d.fig[fig]) do
    points[#points + 1] = { label = r.series, where = arch_is(r.series), values = { [xpos] = r.x, [ypos] = r.y } }
  end
  return match(pick(d, sweeps), points, fig .. ".csv")
end

-- the filtered runs of each panel of a box figure: {position = runs}; group(name) gives where;
-- setting, when given, keeps the panels titled "@Position  <setting>" only
local function box_runs(d, fig, sweeps, group, setting)
  local by, names = {}, { Value = "value", Query = "query", Key = "key" }
  for _, r in ipairs(d.fig[fig]) do
    local pos = names[r.panel:match("^@(%a+)")]
    if pos and (not setting or r.panel:sub(-#setting - 2) == "  " .. setting) then
      by[pos] = by[pos] or {}
      table.insert(by[pos], { label = r.group, where = group(r.group), values = { [pos] = r.value } })
    end
  end
  local out = {}
  for pos, points in pairs(by) do out[pos] = match(pick(d, sweeps), points, fig .. ".csv (@" .. pos .. ")") end
  return out
end

local function in_set(list)
  local set = {}
  for _, e in ipairs(list) do set[e] = true end
  return set
end

local function where_all(...)
  local fs = { ... }
  return function(e) for _, f in ipairs(fs) do if not f(e) then return false end end return true end
end

-- AR's report rows as the figures read them: the quick profile's, then the slice's other runs
local function ar_rows(d)
  local rows = {}
  for _, r in ipairs(d.rows.ar) do rows[#rows + 1] = r end
  for _, r in ipairs(d.rows.ar_lr_slice) do if not d.runs.ar[r.run] then rows[#rows + 1] = r end end
  return rows
end

------------------------------------------------------------------------------------------------
-- the statistics the tables and the ledger share, computed once from the data

local function stats(d)
  local s = {}
  -- AR main curves (lr 1e-3; Attention with positions): per arch and width, the runs
  s.ar = {}
  for _, a in ipairs(paper.archs) do
    s.ar[a] = {}
    for _, w in ipairs { 32, 64 } do
      s.ar[a][w] = pick(d, { "ar" }, function(e) return e.arch == a and e.d == w and e.pos_emb == (a == "attention") end)
    end
  end
  -- Fig. 3b-c plot every run: the quick profile's, the slice's and Mamba's at d = 256
  s.ar_value = scatter_runs(d, "fig3b", { "ar", "ar_lr_slice", "ar_mamba_256" }, "value", "query") -- Fig. 3b: the value's filter
  s.ar_query = scatter_runs(d, "fig3c", { "ar", "ar_lr_slice", "ar_mamba_256" }, "query", "key")   -- Fig. 3c: the query's filter
  s.ar_total, s.slice_done = #d.ids.ar + #d.ids.ar_lr_slice + #d.ids.ar_mamba_256, #d.ids.ar_lr_slice
  -- AR main curves at each learning rate (1e-3: the quick profile's two seeds; the others: the
  -- slice's seed 42), and the best one per (arch, width) as Fig. 3a picks it
  s.ar_lr, s.ar_best = {}, {}
  for _, a in ipairs(paper.archs) do
    s.ar_lr[a], s.ar_best[a] = {}, {}
    for _, w in ipairs { 32, 64 } do
      s.ar_lr[a][w] = {}
      for _, lr in ipairs(T.lrs) do
        s.ar_lr[a][w][lr] = pick(d, { "ar", "ar_lr_slice" }, function(e)
          return e.arch == a and e.d == w and e.pos_emb == (a == "attention") and e.lr == lr end)
      end
    end
  end
  local best = paper.best_per_width(ar_rows(d), { where = function(r) return r.pos_emb == (r.arch == "attention") end })
  for a, by_w in pairs(best) do
    for w, b in pairs(by_w) do
      if s.ar_best[a] and s.ar_lr[a][w] then
        local set = in_set(b.runs)
        s.ar_best[a][w] = { lr = b.lr, mean = b.mean, runs = pick(d, { "ar", "ar_lr_slice" }, function(e) return set[e.id] end) }
      end
    end
  end
  s.retrained = d.retrained
  -- Mamba at the paper's d = 256 at its best rate of the slice (profile mamba_256, one run)
  s.mamba256 = pick(d, { "ar_mamba_256" })[1]
  -- Mamba by conv width (4: ar's Mamba)
  local function conv_is(k) return function(e) return e.arch == "mamba" and (e.d_conv or 4) == k end end
  s.mamba = {}
  for k = 0, 4 do
    s.mamba[k] = {}
    for _, w in ipairs { 32, 64 } do
      s.mamba[k][w] = pick(d, { "mamba_conv", "ar" }, where_all(conv_is(k), function(e) return e.d == w end))
    end
  end
  -- the same at Mamba's best rate of the slice at d = 64 (mamba_conv's profile best_lr; 4: the slice's runs)
  s.mamba_rate = s.ar_best.mamba[64].lr
  s.mamba_best = {}
  for k = 0, 4 do
    s.mamba_best[k] = {}
    for _, w in ipairs { 32, 64 } do
      s.mamba_best[k][w] = pick(d, { "mamba_conv_best_lr", "ar_lr_slice" },
        where_all(conv_is(k), function(e) return e.d == w and e.lr == s.mamba_rate end))
    end
  end
  -- the Mamba runs that pass each position's filter, as recorded in docs/img/reproduction/filter.csv
  -- (Fig. 6b shows the kernels the paper shows, not conv 0's one passing run)
  local passes = {}
  for line in assert(mech.sys.read_file(T.filter_csv)):gmatch("[^\n]+") do
    local run, pos = line:match("^[^,]*,([^,]*),([^,]*),")
    if run and pos ~= "position" then passes[pos] = passes[pos] or {}; passes[pos][run] = true end
  end
  s.mamba_filtered = {}
  for pos, runs in pairs(passes) do
    s.mamba_filtered[pos] = pick(d, { "mamba_conv", "ar" }, function(e) return e.arch == "mamba" and runs[e.id] end)
  end
  -- Based by kernel (3: ar's Based), long convs, BaseConv with long convs
  s.based_groups = {
    { "1", function(e) return e.arch == "based" and not e.long and e.d_conv == 1 end },
    { "2", function(e) return e.arch == "based" and not e.long and e.d_conv == 2 end },
    { "3 (`ar`)", function(e) return e.arch == "based" and not e.long and e.d_conv == nil end },
    { "4", function(e) return e.arch == "based" and not e.long and e.d_conv == 4 end },
    { "long", function(e) return e.arch == "based" and e.long end },
    { "BaseConv, long convs", function(e) return e.arch == "base_conv" and e.long end },
  }
  s.based = {}
  for _, g in ipairs(s.based_groups) do
    s.based[g[1]] = {}
    for _, w in ipairs { 32, 64 } do
      s.based[g[1]][w] = pick(d, { "based_ablation", "ar" }, where_all(g[2], function(e) return e.d == w end))
    end
  end
  -- ATR (5, 20): one run per arch and width; the filter from Fig. 4b's boxes
  s.atr = {}
  for _, a in ipairs(paper.archs) do
    s.atr[a] = {}
    for _, w in ipairs { 32, 64 } do s.atr[a][w] = pick(d, { "atr_easy" }, function(e) return e.arch == a and e.d == w end)[1] end
  end
  local function by_name(g) return arch_is(arch_by_name[g] or g) end
  s.atr_filtered = box_runs(d, "fig4b", { "atr_easy" }, by_name, "(5, 20)")
  s.atr_total = #d.ids.atr_easy
  -- ATR (5, 8192) and (10, 20) (`atr_hard`): one run per setting, arch and width; its rows carry
  -- the filter denominators
  s.hard = {}
  for _, st in ipairs(T.hard_settings) do
    s.hard[st.preset] = {}
    for _, a in ipairs(paper.archs) do
      s.hard[st.preset][a] = {}
      for _, w in ipairs { 32, 64 } do
        s.hard[st.preset][a][w] = pick(d, { "atr_hard" }, function(e)
          return e.arch == a and e.d == w and e.task:find(st.preset .. "-", 1, true) == 1 end)[1]
      end
    end
  end
  s.hard_total = #d.ids.atr_hard
  -- the ATR split: one run per arch and width, evaluated on dev and test
  s.split = {}
  for _, a in ipairs(paper.archs) do
    s.split[a] = {}
    for _, w in ipairs { 32, 64 } do s.split[a][w] = pick(d, { "atr_split" }, function(e) return e.arch == a and e.d == w end)[1] end
  end
  s.split_total = #d.ids.atr_split
  -- v3's DeltaNet on AR: two seeds per width; its rows carry the filter denominators
  s.delta = {}
  for _, w in ipairs { 32, 64 } do s.delta[w] = pick(d, { "delta_net" }, function(e) return e.d == w end) end
  -- Fig. 4b's points of these settings must be the runs the denominators pass, no more, no fewer
  for _, st in ipairs(T.hard_settings) do
    local plotted = box_runs(d, "fig4b", { "atr_hard" }, function(g)
      return where_all(by_name(g), function(e) return e.task:find(st.preset .. "-", 1, true) == 1 end) end, st.title)
    for _, pos in ipairs { "value", "query", "key" } do
      local got = in_set(plotted[pos] or {})
      for _, e in ipairs(pick(d, { "atr_hard" }, function(e) return e.task:find(st.preset .. "-", 1, true) == 1 end)) do
        if passes_at(e, pos) ~= (got[e] == true) then
          fail(string.format("fig4b.csv (@%s %s): run %s %s the filter (attrib_den %s) but %s plotted", pos, st.title, e.id,
            passes_at(e, pos) and "passes" or "fails", g9(e[pos .. "_den"]), got[e] and "is" or "is not"))
        end
      end
    end
  end
  -- v3's Mamba conv ablation on ATR (5, 20): one run per d_conv (0-3) and width, its rows with the
  -- filter denominators; d_conv 4 is atr_easy's Mamba, filtered by Fig. 4b. The figure must plot
  -- exactly the runs the denominators pass, and atr_easy's Mamba as Fig. 4b does.
  s.atr_conv = {}
  for k = 0, 3 do
    s.atr_conv[k] = {}
    for _, w in ipairs { 32, 64 } do
      s.atr_conv[k][w] = pick(d, { "atr_mamba_conv" }, function(e) return e.d_conv == k and e.d == w end)[1]
    end
  end
  s.atr_conv_total = #d.ids.atr_mamba_conv
  local plotted = box_runs(d, "v3_atr_mamba_conv", { "atr_mamba_conv", "atr_easy" }, function(g)
    local k = tonumber(g:match("^conv (%d)$"))
    return function(e) return e.arch == "mamba" and (e.d_conv or 4) == k end
  end)
  for _, pos in ipairs(s.atr_conv_total > 0 and { "value", "query", "key" } or {}) do
    local got = in_set(plotted[pos] or {})
    for _, e in ipairs(pick(d, { "atr_mamba_conv" })) do
      if passes_at(e, pos) ~= (got[e] == true) then
        fail(string.format("v3_atr_mamba_conv.csv (@%s): run %s %s the filter (attrib_den %s) but %s plotted", pos, e.id,
          passes_at(e, pos) and "passes" or "fails", g9(e[pos .. "_den"]), got[e] and "is" or "is not"))
      end
    end
    local easy = in_set(of_arch(s.atr_filtered[pos] or {}, "mamba"))
    for _, e in ipairs(pick(d, { "atr_easy" }, arch_is("mamba"))) do
      if (easy[e] == true) ~= (got[e] == true) then
        fail(string.format("v3_atr_mamba_conv.csv (@%s): atr_easy's run %s is %s in Fig. 4b but %s here", pos, e.id,
          easy[e] and "plotted" or "not plotted", got[e] and "plotted" or "not plotted"))
      end
    end
  end
  -- depth (appendix D): runs per arch, number of layers and width. AR: 1 and 3 layers from
  -- ar_layers (lr 1e-3, seed 42), 2 from `ar` (lr 1e-3, both seeds) for accuracy and from the
  -- slice's second training of `ar`'s seed-42 runs for the mixer output, which `ar`'s rows lack.
  -- ATR (5, 20): 1 layer from atr_1layer, 2 from atr_easy. Sibling: all three from sibling.
  local function by_depth(sweeps, depths, where)
    local out = {}
    for _, a in ipairs(paper.archs) do
      out[a] = {}
      for _, L in ipairs(depths) do
        out[a][L] = {}
        for _, w in ipairs { 32, 64 } do
          out[a][L][w] = pick(d, { sweeps[L] }, function(e)
            return e.arch == a and e.d == w and (e.n_layers or 2) == L and (not where or where(e)) end)
        end
      end
    end
    return out
  end
  s.layers = by_depth({ "ar_layers", "ar", "ar_layers" }, { 1, 2, 3 },
    function(e) return e.pos_emb == (e.arch == "attention") end)
  s.layers_mixer = by_depth({ "ar_layers", "retrained", "ar_layers" }, { 1, 2, 3 },
    function(e) return e.pos_emb == (e.arch == "attention") end)
  s.atr_layers = by_depth({ "atr_1layer", "atr_easy" }, { 1, 2 })
  s.sibling = by_depth({ "sibling", "sibling", "sibling" }, { 1, 2, 3 })
  s.layers_total, s.atr_1layer_total, s.sibling_total = #d.ids.ar_layers, #d.ids.atr_1layer, #d.ids.sibling
  -- Attention without positions on AR (`ar`'s nope slice), per width
  s.ar_nope = {}
  for _, w in ipairs { 32, 64 } do
    s.ar_nope[w] = pick(d, { "ar_nope" }, function(e) return e.arch == "attention" and not e.pos_emb and e.d == w end)
  end
  -- v3 next key: the per-run values Fig. v3_next_key plotted (layer 0; filtered per panel) and
  -- the mixer-internal means of the mamba_next_key heatmap
  s.next_key = {}
  for _, r in ipairs(d.fig.v3_next_key) do
    local key = r.panel .. "|" .. r.group
    s.next_key[key] = s.next_key[key] or {}
    table.insert(s.next_key[key], r.value)
  end
  -- the next-key rerun on the slice's best-lr Mamba checkpoints: per run, site and position
  s.nk_best = {}
  for _, r in ipairs(d.fig.mamba_next_key_best_lr_runs) do
    local e = s.nk_best[r.run]
    if not e then
      e = { id = r.run, d = r.d_model, lr = r.lr, accuracy = r.accuracy, at = {}, pass = {} }
      s.nk_best[r.run], s.nk_best[#s.nk_best + 1] = e, e
    end
    e.at[r.site .. "|" .. r.position] = r.attrib
    e.pass[r.site .. "|" .. r.position] = r.passes == true or r.passes == "true"
  end
  table.sort(s.nk_best, function(a, b) return a.d < b.d end)
  s.next_key_heat = {}
  for _, r in ipairs(d.fig.mamba_next_key) do
    if type(r.value) == "number" then s.next_key_heat[r.ylabel .. "|" .. r.xlabel] = r.value end
  end
  return s
end

-- the runs of list that are in the filtered set
local function passing(list, filtered)
  local set, out = in_set(filtered or {}), {}
  for _, e in ipairs(list) do if set[e] then out[#out + 1] = e end end
  return out
end

local function concat(a, b)
  local out = {}
  for _, e in ipairs(a) do out[#out + 1] = e end
  for _, e in ipairs(b) do out[#out + 1] = e end
  return out
end

local function row(cells) return "| " .. table.concat(cells, " | ") .. " |" end

-- a paragraph as the page's source wraps it (100 columns), appended to lines
local function para(lines, text)
  local line = ""
  for word in text:gmatch("%S+") do
    if line ~= "" and utf8.len(line) + 1 + utf8.len(word) > 100 then lines[#lines + 1] = line; line = word
    else line = line == "" and word or (line .. " " .. word) end
  end
  if line ~= "" then lines[#lines + 1] = line end
  return lines
end

------------------------------------------------------------------------------------------------
-- the tables, in the page's order: each returns its lines

local tables = {}

tables["ar-accuracy"] = function(s)
  local paper_says = { attention = "100% from d = 32 on", based = "≈99% at d = 256, almost Attention's curve",
    mamba = "≈91% at d = 256, \"a close third\"", hyena = "< 30%", base_conv = "< 10%", h3 = "< 3%" }
  local order = { "attention", "based", "mamba", "hyena", "base_conv", "h3" }
  local lines = { "| architecture | d = 32 | d = 64 | the paper |", "|---|---|---|---|" }
  for _, a in ipairs(order) do
    lines[#lines + 1] = row { arch_label(a),
      ms(field(s.ar[a][32], "accuracy"), 3), ms(field(s.ar[a][64], "accuracy"), 3), paper_says[a] }
  end
  return lines
end

-- a learning rate as the page writes it (3e-4, 1e-3, ...)
local function lr_str(lr) return (string.format("%.0e", lr):gsub("e%-0", "e-")) end

tables["ar-lr"] = function(s)
  local order = { "attention", "based", "mamba", "hyena", "base_conv", "h3" }
  local head = { "architecture", "width" }
  for _, lr in ipairs(T.lrs) do head[#head + 1] = "lr " .. lr_str(lr) end
  head[#head + 1], head[#head + 2] = "best lr", "@ Value / @ Query / @ Key at the best lr"
  local lines = { row(head), "|" .. string.rep("---|", #head) }
  for _, a in ipairs(order) do
    for _, w in ipairs { 32, 64 } do
      local cells, b = { arch_label(a), "d = " .. w }, s.ar_best[a][w]
      for _, lr in ipairs(T.lrs) do cells[#cells + 1] = ms(field(s.ar_lr[a][w][lr], "accuracy"), 3) end
      cells[#cells + 1] = b and lr_str(b.lr) or "–"
      cells[#cells + 1] = b and string.format("%s / %s / %s", ms(field(b.runs, "value")), ms(field(b.runs, "query")),
        ms(field(b.runs, "key"))) or "–"
      lines[#lines + 1] = row(cells)
    end
    local m = a == "mamba" and s.mamba256
    if m then
      local cells = { paper.arch_name(a), "d = 256" }
      for _, lr in ipairs(T.lrs) do cells[#cells + 1] = lr == m.lr and num(m.accuracy, 3) or "–" end
      cells[#cells + 1] = "(" .. lr_str(m.lr) .. ")"
      cells[#cells + 1] = string.format("%s / %s / %s", num(m.value), num(m.query), num(m.key))
      lines[#lines + 1] = row(cells)
    end
  end
  lines[#lines + 1] = ""
  local dmax, dsum = 0, 0
  for _, r in ipairs(s.retrained) do
    local dv = math.abs(r.quick.accuracy - r.slice.accuracy)
    dmax, dsum = math.max(dmax, dv), dsum + dv
  end
  local done = s.slice_done == T.slice_runs and string.format("all %d of its runs", T.slice_runs)
    or string.format("%d of its %d runs so far", s.slice_done, T.slice_runs)
  para(lines, string.format("lr 1e-3: the quick profile's two seeds; the other rates: the slice's seed 42 (%s). The " ..
    "best lr has the best mean accuracy; Attrib at the layer-1 block input, unfiltered.%s The slice " ..
    "also trained the quick profile's %d runs at lr 1e-3, seed 42 again (the same ids, by a later build: the same " ..
    "seed gives the same bits within one build): their test accuracy moved by %s on average, at most %s; the table " ..
    "and the figures keep the quick profile's.", done,
    s.mamba256 and string.format(" Mamba at d = 256 is one run (profile `mamba_256`, seed 42) at its best rate at " ..
      "d = 64, %s, in parentheses: no other rate was trained at that width.", lr_str(s.mamba256.lr)) or "",
    #s.retrained, #s.retrained > 0 and num(dsum / #s.retrained, 3) or "–", num(dmax, 3)))
  return lines
end

tables["ar-attrib"] = function(s)
  local paper_says = { attention = "≈1 at the value (induction)", based = "≈1 at the value (induction)",
    mamba = "≈0 at the value; Query + Key ≈ 1", h3 = "≈0 at the value, mass at the query",
    base_conv = "the one filtered checkpoint: partial induction", hyena = "≈0 at the value, mass at the query" }
  local order = { "attention", "based", "mamba", "h3", "base_conv", "hyena" }
  local lines = para({}, string.format("The filter is taken per position, so each column has its own runs: %d of " ..
    "the %d runs pass it at the value (Fig. 3b's points: @ Value over them), %d at the query (Fig. 3c's points: " ..
    "@ Query and @ Key over them, as Fig. 3c plots them; the key's own filter is not in every run's rows). " ..
    "Mean ± sd over both widths, both seeds at lr 1e-3 and the slice's runs at the other rates, and Mamba's run at d = 256:", #s.ar_value,
    s.ar_total, #s.ar_query))
  for _, l in ipairs {
    "",
    "| architecture | runs: value / query filter | @ Value | @ Query | @ Key | the paper |",
    "|---|---|---|---|---|---|",
  } do lines[#lines + 1] = l end
  for _, a in ipairs(order) do
    local v, q = of_arch(s.ar_value, a), of_arch(s.ar_query, a)
    lines[#lines + 1] = row { paper.arch_name(a), #v .. " / " .. #q, ms(field(v, "value")), ms(field(q, "query")),
      ms(field(q, "key")), paper_says[a] }
  end
  return lines
end

-- the runs of list that pass the filter at pos by their own denominators
local function passing_own(list, pos)
  local out = {}
  for _, e in ipairs(list) do if passes_at(e, pos) then out[#out + 1] = e end end
  return out
end

tables["delta-net"] = function(s)
  local lines = { "| architecture | width | accuracy | @ Value | @ Query | @ Key | runs passing the filter (value / query / key) |",
    "|---|---|---|---|---|---|---|" }
  for _, w in ipairs { 32, 64 } do
    local l = s.delta[w]
    local v, q, k = passing_own(l, "value"), passing_own(l, "query"), passing_own(l, "key")
    lines[#lines + 1] = row { "DeltaNet", "d = " .. w, ms(field(l, "accuracy"), 3), ms(field(v, "value")),
      ms(field(q, "query")), ms(field(k, "key")), string.format("%d / %d / %d of %d", #v, #q, #k, #l) }
  end
  for _, a in ipairs { "attention", "based", "mamba" } do
    lines[#lines + 1] = row { paper.arch_name(a) .. " (`ar`)", "d = 32 / 64",
      ms(field(s.ar[a][32], "accuracy"), 3) .. " / " .. ms(field(s.ar[a][64], "accuracy"), 3), "–", "–", "–", "–" }
  end
  return lines
end

-- a sweep that has not run yet: one line instead of a table
local function not_run(lines, name)
  return para(lines, string.format("(`%s` has not run yet: \"What has run\" below says when it will.)", name))
end

-- the runs of atr_mamba_conv with d_conv from k0 to k1, both widths
local function pick_conv(s, k0, k1)
  local out = {}
  for k = k0, k1 do for _, w in ipairs { 32, 64 } do out[#out + 1] = s.atr_conv[k][w] end end
  return out
end

-- a cell per width of one run's value, "–" where the run is missing or fails pos's filter (by its
-- own denominator, or not in the filtered set when one is given)
local function per_width(runs, key, pos, filtered)
  local set = filtered and in_set(filtered)
  local parts = {}
  for _, w in ipairs { 32, 64 } do
    local e = runs[w]
    local pass = e and (pos == nil or (set and set[e]) or (not set and passes_at(e, pos)))
    parts[#parts + 1] = pass and num(e[key], key == "accuracy" and 3 or 2) or "–"
  end
  return table.concat(parts, " / ")
end

tables["atr-mamba-conv"] = function(s)
  if s.atr_conv_total == 0 then return not_run({}, "atr_mamba_conv") end
  local lines = { "| d_conv | accuracy, d = 32 / 64 | @ Value | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  for k = 0, 3 do
    local r = s.atr_conv[k]
    lines[#lines + 1] = row { tostring(k), per_width(r, "accuracy"), per_width(r, "value", "value"),
      per_width(r, "query", "query"), per_width(r, "key", "key"), k == 0 and "induction: @ Value high" or "–" }
  end
  local easy, f = s.atr.mamba, s.atr_filtered
  lines[#lines + 1] = row { "4 (`atr_easy`)", per_width(easy, "accuracy"), per_width(easy, "value", "value", f.value or {}),
    per_width(easy, "query", "query", f.query or {}), per_width(easy, "key", "key", f.key or {}), "direct retrieval" }
  local runs = pick_conv(s, 0, 3)
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; – : the run fails the position's " ..
    "filter, by its own denominator for d_conv 0–3 and by Fig. 4b for d_conv 4; runs of `atr_mamba_conv` passing: %d " ..
    "of %d at the value, %d at the query, %d at the key.)", #passing_own(runs, "value"), s.atr_conv_total,
    #passing_own(runs, "query"), #passing_own(runs, "key")))
  return lines
end

-- the depth tables (appendix D): "d = 32 / d = 64" accuracy cells of by_depth runs
local function depth_acc(runs)
  return ms(field(runs[32], "accuracy"), 3) .. " / " .. ms(field(runs[64], "accuracy"), 3)
end

local depth_order = { "attention", "based", "base_conv", "hyena", "h3", "mamba" }

tables["ar-layers"] = function(s)
  if s.layers_total == 0 then return not_run({}, "ar_layers") end
  local paper_says = { attention = "1 layer fails; 3 ≈ 2", based = "1 layer (= BaseConv) fails; 3 ≈ 2", base_conv = "3 ≈ 2",
    hyena = "1 ≥ 2; 3 ≈ 2", h3 = "3 ≈ 2", mamba = "1 ≥ 2; 3 ≈ 2 (but at one small width)" }
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers (`ar`) | 3 layers | the paper |", "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.layers[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      depth_acc(l[3]), paper_says[a] }
  end
  return lines
end

-- the mean Attrib of the mixer output at the query in one layer, over the runs of both widths that
-- pass that layer's filter, and how many do
local function mixer_at(runs, layer)
  local v = {}
  for _, w in ipairs { 32, 64 } do
    for _, e in ipairs(runs[w]) do
      if (e.mixer_den[layer] or 0) > 0.01 and e.mixer[layer] then v[#v + 1] = e.mixer[layer] end
    end
  end
  return #v > 0 and mean_of(v) or nil, #v
end

tables["ar-mixer-output"] = function(s)
  if s.layers_total == 0 then return not_run({}, "ar_layers") end
  local paper_says = { attention = "2: layer 1; 3: layer 1, a little in 2", based = "2: layer 1; 3: layer 1, a little in 2",
    base_conv = "2: layer 1; 3: layer 1, a little in 2", hyena = "layer 0 at every depth", h3 = "1: layer 0; 2: layer 1",
    mamba = "1: layer 0; 2: mostly 0, partly 1; 3: 0 or the last, never the middle" }
  local lines = { "| architecture | 1 layer: layer 0 | 2 layers: layer 0 / 1 | 3 layers: layer 0 / 1 / 2 | the paper |",
    "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local cells = { arch_label(a) }
    for L = 1, 3 do
      local parts = {}
      for layer = 0, L - 1 do
        local m, n = mixer_at(s.layers_mixer[a][L], layer)
        parts[#parts + 1] = m and string.format("%s (%d)", num(m), n) or "–"
      end
      cells[#cells + 1] = table.concat(parts, " / ")
    end
    cells[#cells + 1] = paper_says[a]
    lines[#lines + 1] = row(cells)
  end
  lines[#lines + 1] = ""
  para(lines, "(Attrib of the sequence mixer's output (`attention_output`) at the query, the key corrupted: the mean " ..
    "over both widths of the runs that pass that layer's filter, their number in brackets; – : none passes. The " ..
    "2-layer models are the slice's second training of `ar`'s seed-42 runs at lr 1e-3, whose rows hold every layer.)")
  return lines
end

tables["atr-1layer"] = function(s)
  if s.atr_1layer_total == 0 then return not_run({}, "atr_1layer") end
  local paper_says = { attention = "drops clearly", based = "weakest (= BaseConv)", base_conv = "weakest", hyena = "stays strong",
    h3 = "stays strong", mamba = "stays strong" }
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers (`atr_easy`) | the paper, 1 layer |", "|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.atr_layers[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      paper_says[a] }
  end
  return lines
end

tables.sibling = function(s)
  if s.sibling_total == 0 then return not_run({}, "sibling") end
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers | 3 layers | the paper |", "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.sibling[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      depth_acc(l[3]), (a == "based" or a == "base_conv") and "high; 1 layer lags" or "high at every width" }
  end
  return lines
end

tables["mamba-conv-accuracy"] = function(s)
  local paper_says = { [0] = "fails (< 7 %)", "fails (< 7 %)", "succeeds", "succeeds", "succeeds (≈91 % at d = 256)" }
  local lines = { "| d_conv | lr 1e-3, d = 32 | lr 1e-3, d = 64 | lr " .. lr_str(s.mamba_rate) .. ", seed 42: d = 32 / 64 | the paper |",
    "|---|---|---|---|---|" }
  for k = 0, 4 do
    lines[#lines + 1] = row { k == 4 and "4 (`ar`)" or tostring(k), ms(field(s.mamba[k][32], "accuracy"), 3),
      ms(field(s.mamba[k][64], "accuracy"), 3),
      ms(field(s.mamba_best[k][32], "accuracy"), 3) .. " / " .. ms(field(s.mamba_best[k][64], "accuracy"), 3), paper_says[k] }
  end
  return lines
end

tables["mamba-conv-attrib"] = function(s)
  local f = s.mamba_filtered
  local lines = { "| d_conv | runs: value / query / key filter | @ Value | @ Query | @ Key |", "|---|---|---|---|---|" }
  for k = 0, 4 do
    local all = concat(s.mamba[k][32], s.mamba[k][64])
    local v, q, kk = passing(all, f.value), passing(all, f.query), passing(all, f.key)
    lines[#lines + 1] = row { tostring(k), string.format("%d / %d / %d", #v, #q, #kk), ms(field(v, "value")),
      ms(field(q, "query")), ms(field(kk, "key")) }
  end
  return lines
end

local function nk(s, panel, conv) return s.next_key["@" .. panel .. "|conv " .. conv] or {} end

tables["next-key"] = function(s)
  local lines = { "| site, layer 0 | conv 2 | conv 3 | conv 4 |", "|---|---|---|---|" }
  local function add(label, values_of)
    local cells = { label }
    for k = 2, 4 do cells[#cells + 1] = values_of(k) end
    lines[#lines + 1] = row(cells)
  end
  add("next key: mixer output (`attention_output`)", function(k) return ms(nk(s, "Next key  mixer output", k)) end)
  add("next key: block output", function(k) return ms(nk(s, "Next key  block output", k)) end)
  add("next key: conv output (`mixer.conv`), mean", function(k)
    return num(s.next_key_heat["mixer.conv|conv " .. k .. " next key"]) end)
  add("next key: SSM state (`mixer.ssm_state`), mean", function(k)
    return num(s.next_key_heat["mixer.ssm_state|conv " .. k .. " next key"]) end)
  add("key: block output", function(k) return ms(nk(s, "Key  block output", k)) end)
  add("runs passing the filter at the next key", function(k) return tostring(#nk(s, "Next key  block output", k)) end)
  return lines
end

-- the positions and sites of the next-key rerun (experiments/mamba_next_key.lua), in its CSV's names
local nk_positions = paper.next_key_positions
local nk_sites = { "block_output", "attention_output", "mixer.conv", "mixer.ssm_state" }

-- the position with the largest Attrib of a run at layer 0 over nk_sites, and that Attrib
local function nk_argmax(e)
  local best, at = nil, -math.huge
  for _, p in ipairs(nk_positions) do
    for _, site in ipairs(nk_sites) do
      local v = e.at[site .. "|" .. p[1]]
      if v and v > at then best, at = p[2], v end
    end
  end
  return best, at
end

tables["next-key-best-lr"] = function(s)
  if #s.nk_best == 0 then return { "(not run yet: it needs the slice's Mamba runs)" } end
  local lines = { "| run (d, lr, accuracy) | site, layer 0 | @ key | @ value | @ next key | @ query |", "|---|---|---|---|---|---|" }
  for _, e in ipairs(s.nk_best) do
    for _, site in ipairs(nk_sites) do
      local cells = { string.format("d = %d, lr %s, %s", e.d, lr_str(e.lr), num(e.accuracy, 3)), "`" .. site .. "`" }
      for _, p in ipairs(nk_positions) do
        local v = e.at[site .. "|" .. p[1]]
        cells[#cells + 1] = v and (num(v) .. (e.pass[site .. "|" .. p[1]] and "" or " (below the filter)")) or "–"
      end
      lines[#lines + 1] = row(cells)
    end
  end
  return lines
end

tables["based-accuracy"] = function(s)
  local paper_says = { ["1"] = "fails", ["2"] = "works", ["3 (`ar`)"] = "works (≈99 % at d = 256)", ["4"] = "works",
    long = "fails (< 10 %)", ["BaseConv, long convs"] = "fails" }
  local lines = { "| BaseConv kernel in Based | d = 32 | d = 64 | the paper |", "|---|---|---|---|" }
  for _, g in ipairs(s.based_groups) do
    lines[#lines + 1] = row { g[1], ms(field(s.based[g[1]][32], "accuracy"), 3), ms(field(s.based[g[1]][64], "accuracy"), 3),
      paper_says[g[1]] }
  end
  -- how far the two seeds of a cell are apart (the page's prose used to say "within 0.03 everywhere")
  local wide, most = {}, 0
  for _, g in ipairs(s.based_groups) do
    for _, w in ipairs { 32, 64 } do
      local v = field(s.based[g[1]][w], "accuracy")
      local gap = #v == 2 and math.abs(v[1] - v[2]) or 0
      most = math.max(most, gap)
      if gap > 0.03 then wide[#wide + 1] = string.format("kernel %s at d = %d (%s)", g[1], w, num(gap, 3)) end
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(mean ± sd of seeds 42 and 43; the seeds of a cell are at most %s apart%s.)",
    num(most, 3), #wide > 0 and (", more than 0.03 in " .. table.concat(wide, ", ")) or ""))
  return lines
end

tables["atr-easy"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction", hyena = "direct retrieval",
    h3 = "direct retrieval", mamba = "direct retrieval" }
  local f = s.atr_filtered
  local sets = { value = in_set(f.value or {}), query = in_set(f.query or {}), key = in_set(f.key or {}) }
  local function at(a, pos)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.atr[a][w]
      parts[#parts + 1] = (e and sets[pos][e]) and num(e[pos]) or "–"
    end
    return table.concat(parts, " / ")
  end
  local lines = { "| architecture | accuracy, d = 32 | d = 64 | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |",
    "|---|---|---|---|---|---|---|" }
  for _, a in ipairs { "attention", "based", "base_conv", "hyena", "h3", "mamba" } do
    lines[#lines + 1] = row { arch_label(a),
      s.atr[a][32] and num(s.atr[a][32].accuracy, 3) or "–", s.atr[a][64] and num(s.atr[a][64].accuracy, 3) or "–",
      at(a, "value"), at(a, "query"), at(a, "key"), paper_says[a] }
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; runs passing the filter " ..
    "(Fig. 4b's boxes): %d of %d at the value, %d at the query, %d at the key.)", #(f.value or {}), s.atr_total,
    #(f.query or {}), #(f.key or {})))
  return lines
end

local order6 = { "attention", "based", "base_conv", "hyena", "h3", "mamba" }

tables["atr-hard-accuracy"] = function(s)
  local paper_says = { attention = "beats Mamba only at (5, 8192), d ≤ 64", mamba = "matches or beats every " ..
    "architecture at \\|Σ\\| = 20, most clearly at (10, 20)" }
  local function pair(e32, e64) return (e32 and num(e32.accuracy, 3) or "–") .. " / " .. (e64 and num(e64.accuracy, 3) or "–") end
  local lines = { "| architecture | (5, 20), d = 32 / 64 | (5, 8192), d = 32 / 64 | (10, 20), d = 32 / 64 | the paper |",
    "|---|---|---|---|---|" }
  for _, a in ipairs(order6) do
    local cells = { arch_label(a), pair(s.atr[a][32], s.atr[a][64]) }
    for _, st in ipairs(T.hard_settings) do cells[#cells + 1] = pair(s.hard[st.preset][a][32], s.hard[st.preset][a][64]) end
    cells[#cells + 1] = paper_says[a] or "–"
    lines[#lines + 1] = row(cells)
  end
  -- the best architecture per setting and width
  local best = {}
  for _, st in ipairs(T.hard_settings) do
    for _, w in ipairs { 32, 64 } do
      local top
      for _, a in ipairs(order6) do
        local e = s.hard[st.preset][a][w]
        if e and (not top or e.accuracy > top.accuracy) then top = e end
      end
      best[#best + 1] = string.format("%s at d = %d: %s", st.title, w, paper.arch_name(top.arch))
    end
  end
  lines[#lines + 1] = ""
  para(lines, "(test accuracy at the reported step, lr 1e-3, seed 42; (5, 20) after 32 epochs, the two `atr_hard` " ..
    "settings after 5. The most accurate: " .. table.concat(best, ", ") .. ".)")
  return lines
end

tables["atr-hard-attrib"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction" }
  local ssm = { ["(5, 8192)"] = "direct retrieval, mainly layer 1 (@ Key)", ["(10, 20)"] = "direct retrieval, @ Key and @ Query mixed" }
  local lines = { "| setting | architecture | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  local count, failing = { value = 0, query = 0, key = 0 }, {}
  for _, st in ipairs(T.hard_settings) do
    for _, a in ipairs(order6) do
      local function at(pos)
        local parts = {}
        for _, w in ipairs { 32, 64 } do
          local e = s.hard[st.preset][a][w]
          local ok = passes_at(e, pos)
          if ok then count[pos] = count[pos] + 1 end
          -- a run below the position's filter: its value in parentheses
          parts[#parts + 1] = not e and "–" or (ok and num(e[pos]) or "(" .. num(e[pos]) .. ")")
        end
        return table.concat(parts, " / ")
      end
      lines[#lines + 1] = row { st.title, paper.arch_name(a), at("value"), at("query"), at("key"), paper_says[a] or ssm[st.title] }
      for _, w in ipairs { 32, 64 } do
        local e, below = s.hard[st.preset][a][w], {}
        for _, pos in ipairs { "value", "query", "key" } do if e and passes_at(e, pos) == false then below[#below + 1] = pos end end
        if #below > 0 then
          failing[#failing + 1] = string.format("%s at d = %d on %s (accuracy %s) at the %s", paper.arch_name(a), w, st.title,
            num(e.accuracy, 3), table.concat(below, ", "))
        end
      end
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted. Runs passing the 0.01 filter, " ..
    "from their own denominators in the rows: %d of %d at the value, %d at the query, %d at the key; below it: %s, " ..
    "its values in parentheses.)", count.value, s.hard_total, count.query, count.key,
    #failing > 0 and table.concat(failing, "; ") or "none"))
  return lines
end

-- the run of an ATR split cell on a split ("dev" or "test"): its fields
local function on(e, split) return e and (split == "dev" and e.dev or e) or nil end

tables["atr-split-accuracy"] = function(s)
  local paper_says = { attention = "the highest test accuracy (d ≥ 32)", mamba = "the highest dev accuracy; memorises, " ..
    "yet tests above the other non-Attention models", h3 = "generalises nearly as Attention", base_conv = "generalises very little" }
  local function pair(a, f)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.split[a][w]
      parts[#parts + 1] = e and e.dev and num(f(e), 3) or "–"
    end
    return table.concat(parts, " / ")
  end
  local lines = { "| architecture | dev, d = 32 / 64 | test, d = 32 / 64 | dev − test, d = 32 / 64 | the paper |",
    "|---|---|---|---|---|" }
  for _, a in ipairs(order6) do
    lines[#lines + 1] = row { arch_label(a),
      pair(a, function(e) return e.dev.accuracy end), pair(a, function(e) return e.accuracy end),
      pair(a, function(e) return e.dev.accuracy - e.accuracy end), paper_says[a] or "–" }
  end
  local best = {}
  for _, split in ipairs { "dev", "test" } do
    for _, w in ipairs { 32, 64 } do
      local top, top_arch
      for _, a in ipairs(order6) do
        local e = on(s.split[a][w], split)
        if e and e.accuracy and (not top or e.accuracy > top.accuracy) then top, top_arch = e, a end
      end
      if top then best[#best + 1] = string.format("%s at d = %d: %s", split, w, paper.arch_name(top_arch)) end
    end
  end
  local quick_runs = 2 * #paper.archs -- the quick profile: every architecture at d = 32 and 64
  lines[#lines + 1] = ""
  para(lines, "(accuracy at the reported step, lr 1e-3, seed 42, 32 epochs, linear decay; the one run per cell is " ..
    "also the best-dev run Fig. 5a selects. The most accurate: " .. table.concat(best, ", ") .. "." ..
    (s.split_total < quick_runs and string.format(" –: not finished when the rows were taken (%d of the %d runs were).",
      s.split_total, quick_runs) or "") .. ")")
  return lines
end

tables["atr-split-attrib"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction", hyena = "direct retrieval",
    h3 = "direct retrieval", mamba = "direct retrieval" }
  local on_test = { base_conv = "much less induction than on dev" }
  local lines = { "| architecture | split | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  local count, total, below = 0, 0, {}
  for _, a in ipairs(order6) do
    for _, split in ipairs { "dev", "test" } do
      local function at(pos)
        local parts = {}
        for _, w in ipairs { 32, 64 } do
          local e = on(s.split[a][w], split)
          local ok = passes_at(e, pos)
          if e and e[pos] ~= nil then
            total = total + 1
            if ok then count = count + 1 else below[#below + 1] = e end
          end
          parts[#parts + 1] = (not e or e[pos] == nil) and "–" or (ok and num(e[pos]) or "(" .. num(e[pos]) .. ")")
        end
        return table.concat(parts, " / ")
      end
      lines[#lines + 1] = row { paper.arch_name(a), split, at("value"), at("query"), at("key"), split == "test" and on_test[a] or paper_says[a] }
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; Fig. 5c plots every run, unfiltered, " ..
    "as the paper does. In parentheses: the %d of %d values whose run is below the 0.01 filter at that position and split, " ..
    "by the denominators in the rows.)", #below, total))
  return lines
end

------------------------------------------------------------------------------------------------
-- the claims ledger: a row per claim, mechlab's numbers computed here

local function acc(list) return ms(field(list, "accuracy"), 3) end
local function accs_of(by_width) return string.format("d = 32: %s, d = 64: %s", acc(by_width[32]), acc(by_width[64])) end
local function accs(s, a) return accs_of(s.ar[a]) end
local function atr_acc(s, a) return string.format("%s / %s", num(s.atr[a][32].accuracy, 2), num(s.atr[a][64].accuracy, 2)) end

local function max_acc(lists)
  local m = -1
  for _, l in ipairs(lists) do for _, e in ipairs(l) do m = math.max(m, e.accuracy) end end
  return m
end

local settle = {
  -- atr_hard's quick profile trains 5 of the paper's 32 epochs (1.98 h); all 32: x 32 / 5
  atr_hard = "`atr_hard` at the paper's 32 epochs (24 runs, ≈ 12.7 h on 2 cores) and the best of five learning rates",
  -- atr_easy's quick runs at atr_hard's 5 epochs: 2.89 h x 5 / 32
  atr_easy5 = "the (5, 20) main curves at 5 epochs, as `atr_hard` (12 runs, ≈ 0.45 h)",
  atr_split = "`atr_split` (12 runs, 1.39 h)",
  ar_layers = "`ar_layers` (24 runs, 1.98 h)", atr_1layer = "`atr_1layer` (12 runs, 1.46 h)",
  sibling = "`sibling` (36 runs, 1.79 h)",
  atr_mamba_conv = "`atr_mamba_conv` (8 runs, 1.91 h)",
  -- Mamba at the paper's width, at the best rate of the slice (one run)
  d256 = "Mamba at the paper's d = 256 at its best learning rate from the slice (one run)",
  -- the d_conv ablation at Mamba's best rate of the slice (profile best_lr: half of quick's 2.45 core-hours)
  conv_lr = "`mamba_conv` at Mamba's best rate of the slice, 3e-3 (profile `best_lr`, 8 runs, ≈ 1.2 core-hours)",
  next_key = "`experiments/mamba_next_key.lua` on Mamba's best-lr checkpoints of the slice",
  nope = "Attention without positions on AR (`ar` profile `nope`: d = 32 and 64, lr 1e-3, 2 runs, 0.25 h)",
}

-- the depth claims (appendix D), each {text, verdict} or nil while its sweep has not run. A run
-- "fails" below 0.1, "does as well" within 0.05 of the deeper model or above it, "drops" by more
-- than 0.1, "is about the same" within 0.1, "does well" at 0.9 or more.
local function depth_mean(runs) local v = field(runs, "accuracy"); return #v > 0 and mean_of(v) or nil end

local function acc_cell(v) return v and num(v, 3) or "–" end

-- "name x1 / x2 (d = 32), y1 / y2 (d = 64)": the mean accuracies at depths L1 and L2 of by_depth runs
local function depth_pair(by, a, L1, L2)
  local parts = {}
  for _, w in ipairs { 32, 64 } do
    parts[#parts + 1] = string.format("%s / %s (d = %d)", acc_cell(depth_mean(by[a][L1][w])), acc_cell(depth_mean(by[a][L2][w])), w)
  end
  return paper.arch_name(a) .. " " .. table.concat(parts, ", ")
end

-- a verdict from named parts {holds, what}: all hold, some or none
local function parts_verdict(parts)
  local yes, no = {}, {}
  for _, p in ipairs(parts) do if p[1] then yes[#yes + 1] = p[2] else no[#no + 1] = p[2] end end
  if #no == 0 then return "agrees: " .. table.concat(yes, "; ") end
  if #yes == 0 then return "disagrees: not " .. table.concat(no, "; not ") end
  return "agrees in part: " .. table.concat(yes, "; ") .. "; but not " .. table.concat(no, "; not ")
end

local function depth_claims(s)
  local c = {}
  local function each(archs, by, test)
    for _, a in ipairs(archs) do
      for _, w in ipairs { 32, 64 } do if not test(a, w, by[a]) then return false end end
    end
    return true
  end
  local function acc_at(l, L, w) return depth_mean(l[L][w]) or 0 / 0 end
  -- are 1-layer Based and BaseConv below every other 1-layer model at both widths
  local function based_lowest(by)
    for _, w in ipairs { 32, 64 } do
      local lo = math.huge
      for _, a in ipairs { "attention", "hyena", "h3", "mamba" } do lo = math.min(lo, acc_at(by[a], 1, w)) end
      if not (acc_at(by.based, 1, w) < lo and acc_at(by.base_conv, 1, w) < lo) then return false end
    end
    return true
  end
  if s.layers_total > 0 then
    local L = s.layers
    -- "as well" when both depths fail is no finding of its own: the verdict names such a model
    local both_fail = {}
    for _, a in ipairs { "mamba", "hyena" } do
      if each({ a }, L, function(_, w, l) return acc_at(l, 1, w) < 0.1 and acc_at(l, 2, w) < 0.1 end) then
        both_fail[#both_fail + 1] = paper.arch_name(a)
      end
    end
    c.ar_1layer = { "1 layer / 2 layers: " .. table.concat({ depth_pair(L, "mamba", 1, 2), depth_pair(L, "hyena", 1, 2),
        depth_pair(L, "attention", 1, 2), depth_pair(L, "based", 1, 2) }, "; "),
      parts_verdict {
        { each({ "mamba", "hyena" }, L, function(a, w, l) return acc_at(l, 1, w) >= acc_at(l, 2, w) - 0.05 end),
          "1-layer Mamba and Hyena do as well as 2-layer" .. (#both_fail > 0 and
            string.format(" (%s below 0.1 at both depths)", table.concat(both_fail, " and ")) or "") },
        { each({ "attention", "based" }, L, function(a, w, l) return acc_at(l, 1, w) < 0.1 end),
          "1-layer Attention and Based fail" } } }
    local off = {}
    for _, a in ipairs(depth_order) do
      for _, w in ipairs { 32, 64 } do
        if not (math.abs(acc_at(L[a], 3, w) - acc_at(L[a], 2, w)) <= 0.1) then
          off[#off + 1] = { a = a, text = string.format("%s d = %d: %s against %s", paper.arch_name(a), w,
            acc_cell(depth_mean(L[a][3][w])), acc_cell(depth_mean(L[a][2][w]))) }
        end
      end
    end
    local off_text = {}
    for _, o in ipairs(off) do off_text[#off_text + 1] = o.text end
    c.ar_3layer = { string.format("3 layers within 0.1 of 2 layers in %d of %d (architecture, width)%s",
        2 * #depth_order - #off, 2 * #depth_order,
        #off > 0 and ("; not: " .. table.concat(off_text, ", ")) or ""),
      (#off == 0 or (#off == 1 and off[1].a == "mamba")) and "agrees" or
        (#off <= #depth_order and "agrees in part: " .. #off .. " (architecture, width) differ by more than 0.1" or "disagrees") }
    -- which layer writes the answer: the layer of the largest mean over the runs passing its filter
    local expect = { { hyena = { 0 }, h3 = { 0 }, mamba = { 0 } },
      { attention = { 1 }, base_conv = { 1 }, based = { 1 }, h3 = { 1 }, hyena = { 0 }, mamba = { 0 } },
      { attention = { 1 }, base_conv = { 1 }, based = { 1 }, hyena = { 0 }, mamba = { 0, 2 } } }
    local seen, agree, wrong, none = {}, 0, {}, {}
    for depth = 1, 3 do
      local parts = {}
      for _, a in ipairs(depth_order) do
        if expect[depth][a] then
          local best, at
          for layer = 0, depth - 1 do
            local m = mixer_at(s.layers_mixer[a][depth], layer)
            if m and (not best or m > best) then best, at = m, layer end
          end
          local name = paper.arch_name(a)
          if at == nil then none[#none + 1] = string.format("%s %d-layer", name, depth)
          else
            parts[#parts + 1] = string.format("%s %d", name, at)
            local ok = false
            for _, l in ipairs(expect[depth][a]) do ok = ok or l == at end
            if ok then agree = agree + 1 else wrong[#wrong + 1] = string.format("%s %d-layer (layer %d)", name, depth, at) end
          end
        end
      end
      seen[#seen + 1] = string.format("%d layer%s: %s", depth, depth > 1 and "s" or "", #parts > 0 and table.concat(parts, ", ") or "–")
    end
    local n = agree + #wrong
    local text = "the layer whose mixer output at the query restores the most: " .. table.concat(seen, "; ") ..
      (#none > 0 and ("; no run passes the filter: " .. table.concat(none, ", ")) or "")
    c.mixer = { text, n == 0 and "not settled at quick scale: no run passes the filter" or #wrong == 0 and
      string.format("agrees (%d of %d as the paper)", agree, n) or
      string.format("%s: %d of %d as the paper; not %s", agree * 2 >= n and "agrees in part" or "disagrees", agree, n,
        table.concat(wrong, ", ")) }
  end
  if s.atr_1layer_total > 0 then
    local A = s.atr_layers
    c.atr_1layer = { "1 layer / 2 layers: " .. table.concat({ depth_pair(A, "mamba", 1, 2), depth_pair(A, "h3", 1, 2),
        depth_pair(A, "hyena", 1, 2), depth_pair(A, "attention", 1, 2), depth_pair(A, "based", 1, 2),
        depth_pair(A, "base_conv", 1, 2) }, "; "),
      parts_verdict {
        { each({ "mamba", "h3", "hyena" }, A, function(a, w, l) return acc_at(l, 1, w) >= acc_at(l, 2, w) - 0.05 end),
          "1-layer Mamba, H3 and Hyena stay strong" },
        { each({ "attention" }, A, function(a, w, l) return acc_at(l, 1, w) < acc_at(l, 2, w) - 0.1 end),
          "1-layer Attention drops" },
        { based_lowest(A), "1-layer Based and BaseConv are the weakest" } } }
  end
  if s.sibling_total > 0 then
    local S = s.sibling
    local low = {}
    for _, a in ipairs(depth_order) do
      for depth = 1, 3 do
        for _, w in ipairs { 32, 64 } do
          local lagging = depth == 1 and (a == "based" or a == "base_conv")
          if not lagging and not (acc_at(S[a], depth, w) >= 0.9) then
            low[#low + 1] = string.format("%s %d-layer d = %d: %s", paper.arch_name(a), depth, w,
              acc_cell(depth_mean(S[a][depth][w])))
          end
        end
      end
    end
    c.sibling = { string.format("at 0.9 or more: every model but 1-layer Based and BaseConv%s; 1-layer Based %s / %s, " ..
        "BaseConv %s / %s (d = 32 / 64)", #low > 0 and (" except " .. table.concat(low, ", ")) or "",
        acc_cell(depth_mean(S.based[1][32])), acc_cell(depth_mean(S.based[1][64])), acc_cell(depth_mean(S.base_conv[1][32])),
        acc_cell(depth_mean(S.base_conv[1][64]))),
      parts_verdict { { #low == 0, "every other model does well" }, { based_lowest(S), "1-layer Based and BaseConv lag" } } }
  end
  return c
end

-- row 37 (spec §9.3), from atr_mamba_conv and atr_easy's Mamba: @ Value without a conv (d_conv 0)
-- against the short convs' (d_conv 2-4). Induction is the larger part of the effect at the value
-- (> 0.5) in every run; "in direction" when d_conv 0's lowest stays 0.2 above the convs' highest.
local function atr_conv_claim(s)
  local runs = pick_conv(s, 0, 3)
  if #runs < 8 then
    return "not run", "not settled at quick scale: " .. settle.atr_mamba_conv ..
      (#runs > 0 and string.format(" (%d of 8 done)", #runs) or "")
  end
  local v0 = field(passing_own(pick_conv(s, 0, 0), "value"), "value")
  local convs = field(concat(passing_own(pick_conv(s, 2, 3), "value"), of_arch(s.atr_filtered.value or {}, "mamba")), "value")
  local lo0, hi = math.huge, -math.huge
  for _, v in ipairs(v0) do lo0 = math.min(lo0, v) end
  for _, v in ipairs(convs) do hi = math.max(hi, v) end
  local f = s.atr_filtered
  local text = string.format("@ Value (d = 32 / 64): d_conv 0 %s, d_conv 1 %s, d_conv 2 %s, d_conv 3 %s, d_conv 4 (`atr_easy`) %s; " ..
    "accuracy d_conv 0 %s, d_conv 4 %s", per_width(s.atr_conv[0], "value", "value"), per_width(s.atr_conv[1], "value", "value"),
    per_width(s.atr_conv[2], "value", "value"), per_width(s.atr_conv[3], "value", "value"),
    per_width(s.atr.mamba, "value", "value", f.value or {}), per_width(s.atr_conv[0], "accuracy"), per_width(s.atr.mamba, "accuracy"))
  if #v0 == 0 then return text, "disagrees: no d_conv 0 run passes the value's filter" end
  if #convs == 0 then hi = 0 end
  if lo0 > 0.5 and hi < 0.2 then
    return text, string.format("agrees: without a conv the larger part of the effect is at the value (at least %s), " ..
      "with a short conv at most %s", num(lo0), num(hi))
  elseif lo0 > hi + 0.2 then
    return text, string.format("agrees in direction: @ Value without a conv at least %s, with a short conv at most %s",
      num(lo0), num(hi))
  end
  return text, string.format("disagrees: @ Value without a conv at least %s, with a short conv up to %s", num(lo0), num(hi))
end

-- row 26 (appendix D.1), from `ar`'s nope slice: Attention without positions against with them
-- (`ar`, lr 1e-3), failing below 0.1 as elsewhere in the ledger
local function nope_claim(s)
  local nope, pe = s.ar_nope, s.ar.attention
  if #nope[32] + #nope[64] == 0 then return "not run", "not settled at quick scale: " .. settle.nope end
  local m = depth_mean
  local text = string.format("lr 1e-3, without / with positions: d = 32 %s / %s, d = 64 %s / %s", acc_cell(m(nope[32])),
    acc_cell(m(pe[32])), acc_cell(m(nope[64])), acc_cell(m(pe[64])))
  local hi = math.max(m(nope[32]) or 0, m(nope[64]) or 0)
  if hi < 0.1 then return text, "agrees: below 0.1 at both widths" end
  local drop = math.min((m(pe[32]) or 0) - (m(nope[32]) or 0), (m(pe[64]) or 0) - (m(nope[64]) or 0))
  if drop > 0.3 then return text, string.format("agrees in direction: at most %s without positions, but above the paper's ≈6 %%",
    num(hi, 3)) end
  return text, string.format("disagrees: %s without positions", num(hi, 3))
end

local function claims(s)
  local NS = "not settled at quick scale"
  local conv_text, conv_verdict = atr_conv_claim(s)
  local dc = depth_claims(s)
  -- a depth claim's two cells, or "not run" with the sweep that settles it
  local function depth(claim, sweep_name)
    if dc[claim] then return dc[claim][1], dc[claim][2] end
    return "not run", NS .. ": " .. settle[sweep_name]
  end
  -- the learning-rate slice: an architecture is judged at its best lr once the slice has its runs
  local function sliced(a)
    for _, w in ipairs { 32, 64 } do for _, lr in ipairs(T.lrs) do if #s.ar_lr[a][w][lr] == 0 then return false end end end
    return true
  end
  local lr_left = string.format("the AR learning-rate slice (running: %d of its %d runs done) and one run at d = 256 " ..
    "at the best of them", s.slice_done, T.slice_runs)
  local function best(a, w) return s.ar_best[a][w] end
  local function best_accs(a)
    return string.format("d = 32: %s (lr %s), d = 64: %s (lr %s)", num(best(a, 32).mean, 3), lr_str(best(a, 32).lr),
      num(best(a, 64).mean, 3), lr_str(best(a, 64).lr))
  end
  -- neighbouring rates of which one succeeds and the other fails (accuracy > 0.5 against < 0.1)
  local cliffs = {}
  for _, a in ipairs(paper.archs) do
    for _, w in ipairs { 32, 64 } do
      for i = 1, #T.lrs - 1 do
        local l1, l2 = s.ar_lr[a][w][T.lrs[i]], s.ar_lr[a][w][T.lrs[i + 1]]
        if #l1 > 0 and #l2 > 0 then
          local m1, m2 = mean_of(field(l1, "accuracy")), mean_of(field(l2, "accuracy"))
          if math.max(m1, m2) > 0.5 and math.min(m1, m2) < 0.1 then
            cliffs[#cliffs + 1] = string.format("%s d = %d: %s at %s, %s at %s", paper.arch_name(a), w, num(m1, 3),
              lr_str(T.lrs[i]), num(m2, 3), lr_str(T.lrs[i + 1]))
          end
        end
      end
    end
  end
  -- Mamba at the paper's d = 256 (one run at its best rate of the slice), set against the paper's
  -- d = 256 numbers; the other architectures are at d = 64, their widest quick width
  local m256, v256 = s.mamba256, {}
  local at256 = ""
  if m256 and sliced("mamba") then
    at256 = string.format("; Mamba at d = 256 (lr %s, one run): %s", lr_str(m256.lr), num(m256.accuracy, 3))
    local gap = best("attention", 64).mean - m256.accuracy
    local fails = math.max(best("hyena", 32).mean, best("hyena", 64).mean) < 0.3
      and math.max(best("base_conv", 32).mean, best("base_conv", 64).mean) < 0.1
      and math.max(best("h3", 32).mean, best("h3", 64).mean) < 0.03
    local strong = best("attention", 64).mean >= 0.99 and best("based", 64).mean >= 0.95
    local near = math.abs(m256.accuracy - 0.91) <= 0.05
    v256.headline = (near and strong and fails) and string.format("agrees: Mamba %s at d = 256 against ≈91 %%; Attention " ..
      "and Based at d = 64 already at the paper's d = 256 level, Hyena, BaseConv and H3 below its bounds at d ≤ 64",
      num(m256.accuracy, 3))
      or string.format("disagrees in part: Mamba %s at d = 256 against ≈91 %%%s%s", num(m256.accuracy, 3),
        strong and "" or "; Attention or Based below the paper at d = 64", fails and "" or "; a failing architecture above its bound")
    v256.third = gap <= 0.1 and string.format("agrees at the paper's d = 256: third, %s below Attention's d = 64 accuracy " ..
      "(at d ≤ 64 it is not close)", num(gap, 3))
      or string.format("third, not close, at d = 256 too (%s below Attention's d = 64 accuracy)", num(gap, 3))
    v256.retrieval = "agrees for H3 and Hyena; " .. (m256.query > m256.key
      and string.format("agrees for Mamba at d = 256 (@ Query %s, @ Key %s, unfiltered), not at d ≤ 64 (mass mostly at the key)",
        num(m256.query), num(m256.key))
      or string.format("disagrees for Mamba at d = 256 too (@ Query %s, @ Key %s, unfiltered) and at d ≤ 64", num(m256.query),
        num(m256.key)))
    v256.gap = gap
  end
  -- v3's DeltaNet: how far behind Attention at each width, and where it retrieves
  local dn_all = concat(s.delta[32], s.delta[64])
  local dn_v, dn_q, dn_k = passing_own(dn_all, "value"), passing_own(dn_all, "query"), passing_own(dn_all, "key")
  local function behind(list, w) return mean_of(field(s.ar.attention[w], "accuracy")) - mean_of(field(list, "accuracy")) end
  local dn_gap = math.max(behind(s.delta[32], 32), behind(s.delta[64], 64))
  local mamba_gap = math.max(behind(s.ar.mamba[32], 32), behind(s.ar.mamba[64], 64))
  if sliced("mamba") and sliced("attention") then
    mamba_gap = math.max(best("attention", 32).mean - best("mamba", 32).mean, best("attention", 64).mean - best("mamba", 64).mean)
  end
  local dn_verdict = dn_gap <= 0.05
    and string.format("agrees for DeltaNet (at most %s below Attention at either width%s)", num(dn_gap, 3),
      behind(s.delta[64], 64) <= 0 and "; at d = 64 it reaches Attention's accuracy, more than \"close behind\"" or "")
    or string.format("disagrees for DeltaNet (up to %s below Attention)", num(dn_gap, 3))
  dn_verdict = dn_verdict .. (v256.gap and (v256.gap <= 0.1
      and string.format("; agrees for Mamba at the paper's d = 256 (%s below Attention's d = 64 accuracy), not at d ≤ 64 " ..
        "(up to %s below at the best lr of each)", num(v256.gap, 3), num(mamba_gap, 3))
      or string.format("; disagrees for Mamba at d = 256 too (%s below Attention's d = 64 accuracy)", num(v256.gap, 3)))
    or mamba_gap <= 0.1 and "; agrees for Mamba"
    or sliced("mamba") and string.format("; disagrees for Mamba at d ≤ 64 (up to %s below Attention at the best lr of " ..
      "each); %s: %s", num(mamba_gap, 3), NS, settle.d256)
    or string.format("; for Mamba (up to %s below Attention at lr 1e-3) %s: %s", num(mamba_gap, 3), NS, lr_left))
  local dn_value, dn_query = mean_of(field(dn_v, "value")), mean_of(field(dn_q, "query"))
  local dn_mech = (#dn_v > 0 and math.abs(dn_value) < 0.1 and #dn_q > 0 and dn_query > 0.8)
    and string.format("agrees for DeltaNet: direct retrieval at the query, in layer 0 (%d of %d runs pass the query's " ..
      "filter); Mamba as in row 7", #dn_q, #dn_all)
    or "disagrees for DeltaNet: " .. (#dn_v > 0 and math.abs(dn_value) >= 0.1 and "mass at the value" or "not at the query")
  local d64 = {}
  for _, a in ipairs { "attention", "based", "mamba", "hyena", "base_conv", "h3" } do
    d64[#d64 + 1] = num(mean_of(field(s.ar[a][64], "accuracy")), 3)
  end
  local v_att = field(of_arch(s.ar_value, "attention"), "value")
  local v_based = field(of_arch(s.ar_value, "based"), "value")
  local q_mamba, q_h3 = of_arch(s.ar_query, "mamba"), of_arch(s.ar_query, "h3")
  local qk = {}
  for _, e in ipairs(q_mamba) do qk[#qk + 1] = e.query + e.key end
  local bc = of_arch(s.ar_query, "base_conv")
  local hy_q32, hy_q64 = field(s.ar.hyena[32], "query"), field(s.ar.hyena[64], "query")
  local fail3 = max_acc { s.ar.hyena[32], s.ar.hyena[64], s.ar.base_conv[32], s.ar.base_conv[64], s.ar.h3[32], s.ar.h3[64] }
  local mf = s.mamba_filtered
  local function mq(k)
    local all = concat(s.mamba[k][32], s.mamba[k][64])
    return ms(field(passing(all, mf.query), "query")), ms(field(passing(all, mf.key), "key"))
  end
  local q2, k2 = mq(2)
  local q3, k3 = mq(3)
  local q4, k4 = mq(4)
  local low01 = max_acc { s.mamba[0][32], s.mamba[0][64], s.mamba[1][32], s.mamba[1][64] }
  -- the d_conv claims at Mamba's best rate (mamba_conv's profile best_lr), once every cell has its run
  local conv_best = { done = true }
  for k = 0, 4 do for _, w in ipairs { 32, 64 } do conv_best.done = conv_best.done and #s.mamba_best[k][w] > 0 end end
  if conv_best.done then
    local function a(k, w) return mean_of(field(s.mamba_best[k][w], "accuracy")) end
    local low = max_acc { s.mamba_best[0][32], s.mamba_best[0][64], s.mamba_best[1][32], s.mamba_best[1][64] }
    local above, succeed, cells = true, true, {}
    for k = 2, 4 do
      cells[#cells + 1] = string.format("%d: %s / %s", k, num(a(k, 32), 3), num(a(k, 64), 3))
      succeed = succeed and a(k, 64) > 0.5
      for _, w in ipairs { 32, 64 } do above = above and a(k, w) > math.max(a(0, w), a(1, w)) end
    end
    local at = "lr " .. lr_str(s.mamba_rate)
    conv_best.acc_text = string.format("; at %s (seed 42): d_conv 0, 1 at most %s, %s", at, num(low, 3), table.concat(cells, ", "))
    conv_best.acc_verdict = low >= 0.07 and string.format("disagrees at Mamba's best rate, %s: d_conv 0 or 1 reaches %s", at, num(low, 3))
      or not above and string.format("disagrees at Mamba's best rate, %s: a kernel of 2–4 not above 0 and 1", at)
      or succeed and string.format("agrees at Mamba's best rate, %s: d_conv 0 and 1 below 7 %%, 2–4 above 0.5 at d = 64", at)
      or string.format("agrees in direction at Mamba's best rate, %s: d_conv 0 and 1 below 7 %%, 2–4 above them at both " ..
        "widths but not all above 0.5 at d = 64", at)
    local q, kk, parts = {}, {}, {}
    for k = 2, 4 do
      local all = concat(s.mamba_best[k][32], s.mamba_best[k][64])
      local qv, kv = field(passing_own(all, "query"), "query"), field(passing_own(all, "key"), "key")
      q[k], kk[k] = #qv > 0 and mean_of(qv) or 0, #kv > 0 and mean_of(kv) or 0
      parts[#parts + 1] = string.format("%d %s / %s", k, ms(qv), ms(kv))
    end
    conv_best.attrib_text = string.format("; at %s (each position's filter): %s", at, table.concat(parts, ", "))
    conv_best.attrib_verdict = q[4] > kk[4]
      and string.format("agrees at Mamba's best rate, %s (d_conv 4 mostly @ Query)", at)
      or q[4] > q[3] and q[3] > q[2] and string.format("agrees in direction at Mamba's best rate, %s (@ Query grows with the " ..
        "kernel), disagrees in degree (d_conv 4 mostly @ Key)", at)
      or string.format("disagrees at Mamba's best rate, %s (d_conv 4 mostly @ Key, @ Query not growing with the kernel)", at)
  end
  local hi2 = {}
  for k = 2, 4 do hi2[#hi2 + 1] = string.format("%d: %s / %s", k, acc(s.mamba[k][32]), acc(s.mamba[k][64])) end
  local bk = {}
  for _, g in ipairs { "2", "3 (`ar`)", "4" } do bk[#bk + 1] = acc(s.based[g][64]) end
  local bfail = max_acc { s.based["1"][32], s.based["1"][64], s.based.long[32], s.based.long[64] }
  local atr_lo, atr_hi = 1, 0
  for _, a in ipairs(paper.archs) do
    for _, w in ipairs { 32, 64 } do atr_lo, atr_hi = math.min(atr_lo, s.atr[a][w].accuracy), math.max(atr_hi, s.atr[a][w].accuracy) end
  end
  local function atr_attrib(a, pos) return num(s.atr[a][32][pos]) .. " / " .. num(s.atr[a][64][pos]) end
  -- the `atr_hard` settings: accuracy and Attrib at d = 32 / 64 (a value below the filter in parentheses)
  local function hard_acc(preset, a)
    return num(s.hard[preset][a][32].accuracy, 3) .. " / " .. num(s.hard[preset][a][64].accuracy, 3)
  end
  -- @ Query / @ Key of the d = 32 run, then of the d = 64 run
  local function qk_of(preset, a)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.hard[preset][a][w]
      local function v(pos) return passes_at(e, pos) and num(e[pos]) or "(" .. num(e[pos]) .. ")" end
      parts[#parts + 1] = v("query") .. " / " .. v("key")
    end
    return paper.arch_name(a) .. " " .. table.concat(parts, " and ")
  end
  local function hard_attrib(preset, a, pos)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.hard[preset][a][w]
      parts[#parts + 1] = passes_at(e, pos) and num(e[pos]) or "(" .. num(e[pos]) .. ")"
    end
    return table.concat(parts, " / ")
  end
  -- how far an architecture's accuracy is ahead of the best other one at a width (negative: behind)
  local atr5 = {}
  for _, a in ipairs(paper.archs) do atr5[a] = s.atr[a] end
  local function lead(by_arch, a, w)
    local other = -1
    for _, b in ipairs(paper.archs) do if b ~= a then other = math.max(other, by_arch[b][w].accuracy) end end
    return num(by_arch[a][w].accuracy - other, 3)
  end
  local max_hard_value = -1
  for _, st in ipairs(T.hard_settings) do
    for _, a in ipairs { "hyena", "h3", "mamba" } do
      for _, w in ipairs { 32, 64 } do
        local e = s.hard[st.preset][a][w]
        if passes_at(e, "value") then max_hard_value = math.max(max_hard_value, e.value) end
      end
    end
  end
  -- the ATR split: the most accurate architecture on a split at a width, and accuracies / Attrib
  local function split_best(split, w)
    local top, top_arch
    for _, a in ipairs(paper.archs) do
      local e = on(s.split[a][w], split)
      if e and (not top or e.accuracy > top.accuracy) then top, top_arch = e, a end
    end
    return top and paper.arch_name(top_arch) or "–"
  end
  -- (a cell whose run has not finished shows "–")
  local function split_per_width(a, f)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.split[a][w]
      parts[#parts + 1] = e and e.dev and f(e) or "–"
    end
    return table.concat(parts, " / ")
  end
  local function split_acc(a, split)
    return split_per_width(a, function(e) return num(on(e, split).accuracy, 3) end)
  end
  local function split_gap(a)
    return split_per_width(a, function(e) return string.format("%s (%s)", num(e.accuracy, 2), num(e.dev.accuracy - e.accuracy, 2)) end)
  end
  -- the sum of Attrib at the positions, on dev then on test, per width
  local function split_shift(a, positions)
    local function sum(t) local v = 0; for _, pos in ipairs(positions) do v = v + t[pos] end return v end
    return split_per_width(a, function(e) return num(sum(e.dev)) .. " → " .. num(sum(e)) end)
  end
  local function split_ranking()
    local list = {}
    for _, a in ipairs(paper.archs) do list[#list + 1] = a end
    local function at64(a) return s.split[a][64] and s.split[a][64].accuracy or -1 end
    table.sort(list, function(x, y) return at64(x) > at64(y) end)
    for i, a in ipairs(list) do
      list[i] = paper.arch_name(a) .. " " .. split_per_width(a, function(e) return num(e.accuracy, 2) end)
    end
    return table.concat(list, ", ")
  end
  -- the architectures whose ATR split runs have not all finished
  local split_missing = {}
  for _, a in ipairs(paper.archs) do
    if not (s.split[a][32] and s.split[a][64]) then split_missing[#split_missing + 1] = paper.arch_name(a) end
  end
  local split_pending = #split_missing > 0 and (NS .. " yet: `atr_split` is still running (" ..
    table.concat(split_missing, ", ") .. " not finished)") or nil
  -- the verdicts, read from the rows once every run is there: each part of a claim, held or not
  local function verdict(parts)
    local held, failed = {}, {}
    for _, p in ipairs(parts) do table.insert(p[1] and held or failed, p[2]) end
    if #failed == 0 then return "agrees (" .. table.concat(held, "; ") .. ")" end
    if #held == 0 then return "disagrees at this scale (not: " .. table.concat(failed, "; ") .. ")" end
    return "agrees in part: " .. table.concat(held, "; ") .. "; but not: " .. table.concat(failed, "; ")
  end
  local function both(f) return f(32) and f(64) end
  local function acc_of(a, w, split) return on(s.split[a][w], split).accuracy end
  local verdict_split = {}
  if not split_pending then
    local function best_is(a, split) return both(function(w)
      for _, b in ipairs(paper.archs) do if acc_of(b, w, split) > acc_of(a, w, split) then return false end end
      return true end) end
    local function gap(a, w) return acc_of(a, w, "dev") - acc_of(a, w, "test") end
    local function above_others(a, except, f) return both(function(w)
      for _, b in ipairs(paper.archs) do if b ~= a and b ~= except and f(b, w) >= f(a, w) then return false end end
      return true end) end
    local function test_acc(a, w) return acc_of(a, w, "test") end
    local function sum(t, positions) local v = 0; for _, pos in ipairs(positions) do v = v + t[pos] end return v end
    local function same(a, positions) return both(function(w)
      local e = s.split[a][w]
      return math.abs(sum(e.dev, positions) - sum(e, positions)) <= 0.2 end) end
    verdict_split[18] = verdict {
      { best_is("mamba", "dev"), "Mamba the most accurate on dev at both widths" },
      { best_is("attention", "test"), "Attention the most accurate on test at both widths" } }
    verdict_split[19] = verdict {
      { above_others("mamba", nil, gap), "Mamba's dev − test gap the largest at both widths" },
      { above_others("mamba", "attention", test_acc), "Mamba's test above every other non-Attention model's" },
      { both(function(w) return math.abs(test_acc("h3", w) - test_acc("attention", w)) <= 0.05 end),
        "H3's test within 0.05 of Attention's" },
      { both(function(w) for _, b in ipairs(paper.archs) do if test_acc(b, w) < test_acc("base_conv", w) then return false end end
        return true end), "BaseConv's test the lowest" } }
    local same_all = true
    for _, a in ipairs { "attention", "based" } do same_all = same_all and same(a, { "value" }) end
    for _, a in ipairs { "hyena", "h3", "mamba" } do same_all = same_all and same(a, { "query", "key" }) end
    verdict_split[20] = verdict {
      { same_all, "Attention's and Based's @ Value and the SSMs' @ Query + @ Key within 0.2 between dev and test" },
      { both(function(w) local e = s.split.base_conv[w]; return e.dev.value - e.value > 0.2 end),
        "BaseConv's @ Value lower on test by more than 0.2" } }
    verdict_split[21] = verdict {
      { both(function(w)
        for _, b in ipairs(paper.archs) do
          if b ~= "attention" and b ~= "mamba" and test_acc(b, w) >= math.min(test_acc("attention", w), test_acc("mamba", w)) then
            return false end
        end
        return true end), "Attention and Mamba the two most accurate on test at both widths" } }
  end
  local nk4 = s.next_key_heat["mixer.conv|conv 4 next key"]
  local key_block = {}
  for k = 2, 4 do key_block[#key_block + 1] = num(mean_of(nk(s, "Key  block output", k))) end
  local nk_block = {}
  for k = 2, 4 do for _, v in ipairs(nk(s, "Next key  block output", k)) do nk_block[#nk_block + 1] = v end end
  local nk_max = -1
  for _, v in ipairs(nk_block) do nk_max = math.max(nk_max, v) end
  -- the next-key rerun at Mamba's best lr: where each run restores the most at layer 0
  local nk_best_text, nk_best_verdict, nk_wins = "", nil, 0
  if #s.nk_best > 0 then
    local parts = {}
    for _, e in ipairs(s.nk_best) do
      local where, v = nk_argmax(e)
      if where == "next key" then nk_wins = nk_wins + 1 end
      parts[#parts + 1] = string.format("d = %d: the most at the %s (%s), conv output at the next key %s", e.d, where, num(v),
        num(e.at["mixer.conv|next_key"] or 0 / 0))
    end
    nk_best_text = "; at the best lr (layer 0, any of four sites): " .. table.concat(parts, "; ")
    nk_best_verdict = (nk_wins == #s.nk_best and "agrees at Mamba's best lr"
      or nk_wins > 0 and string.format("agrees in %d of %d best-lr runs", nk_wins, #s.nk_best)
      or "disagrees at this scale, at Mamba's best lr too")
    if s.nk_best[#s.nk_best].d < 256 then nk_best_verdict = nk_best_verdict .. ": " .. NS .. ": " .. settle.d256
    elseif nk_wins == 0 then
      local conv = s.nk_best[#s.nk_best].at["mixer.conv|next_key"] or 0
      nk_best_verdict = "disagrees at Mamba's best lr up to the paper's d = 256" .. (conv > 0.1 and string.format(
        " (there, inside the mixer, the conv output at the next key restores %s: part of the mechanism)", num(conv)) or "")
    end
  end
  -- at the best lr: d = 64 accuracies, Based against Attention, Mamba's retrieval
  local d64b = {}
  if sliced("mamba") then
    for _, a in ipairs { "attention", "based", "mamba", "hyena", "base_conv", "h3" } do d64b[#d64b + 1] = num(best(a, 64).mean, 3) end
  end
  local based_verdict = "agrees at d = 64; at d = 32 Based is behind: " .. NS .. " (one lr): " .. lr_left
  if sliced("based") and sliced("attention") then
    local behind_at = {}
    for _, w in ipairs { 32, 64 } do
      local g = best("attention", w).mean - best("based", w).mean
      if g > 0.05 then behind_at[#behind_at + 1] = string.format("d = %d (%s)", w, num(g, 3)) end
    end
    based_verdict = #behind_at == 0 and "agrees at the best lr of each (within 0.05 at both widths)"
      or ("agrees at the best lr of each except at " .. table.concat(behind_at, ", ") .. ", where Based is behind")
  end
  local mamba_retrieval = "agrees for H3 and Hyena; disagrees for Mamba (mass mostly at the key) at d ≤ 64, lr 1e-3: " .. lr_left
  if sliced("mamba") then
    local q, k = {}, {}
    for _, w in ipairs { 32, 64 } do
      for _, v in ipairs(field(best("mamba", w).runs, "query")) do q[#q + 1] = v end
      for _, v in ipairs(field(best("mamba", w).runs, "key")) do k[#k + 1] = v end
    end
    mamba_retrieval = "agrees for H3 and Hyena; " .. (mean_of(q) > mean_of(k)
      and "agrees for Mamba at its best lr (more at the query than at the key)"
      or "disagrees for Mamba at its best lr too (mass mostly at the key) at d ≤ 64") .. ": " .. NS .. ": " .. settle.d256
  end

  return {
    -- spec §8.1 headline numbers and spec §8.2.1
    { "spec §8.2.1", "Attention reaches 100 % on AR from d = 32 on", "100 %", accs(s, "attention"), "agrees" },
    { "spec §8.2.1", "AR at d = 256, best LR: Attention 100 %, Based ≈99 %, Mamba ≈91 %, Hyena < 30 %, BaseConv < 10 %, H3 < 3 %",
      "100 / ≈99 / ≈91 / < 30 / < 10 / < 3 %",
      "at d = 64, lr 1e-3: " .. table.concat(d64, " / ") .. (sliced("mamba") and ("; at the best lr: " .. table.concat(d64b, " / ")) or "")
        .. at256,
      v256.headline or (NS .. ": " .. (sliced("mamba") and settle.d256 or lr_left)) },
    { "spec §8.2.1", "Attention and Based solve AR with almost the same width-scaling curve", "Based ≈ Attention at every d",
      "Based " .. accs(s, "based") .. (sliced("based") and ("; at the best lr " .. best_accs("based")) or ""),
      based_verdict },
    { "spec §8.2.1", "Mamba is a close third", "≈91 % at d = 256",
      "Mamba " .. accs(s, "mamba") .. (sliced("mamba") and ("; at the best lr " .. best_accs("mamba")) or "") .. at256,
      v256.third or sliced("mamba") and ("third, not close, at d ≤ 64 at its best lr too: " .. NS .. ": " .. settle.d256)
        or ("third, not close: " .. NS .. ": " .. lr_left) },
    { "spec §8.2.1", "Hyena, BaseConv and H3 fail AR", "< 30 %, < 10 %, < 3 %",
      "at most " .. num(fail3, 3) .. " (any of their 12 runs)", "agrees" },
    { "spec §8.2.1", "Nearly all Attention and Based checkpoints show full attribution at the value (induction)", "≈1 @ Value",
      string.format("Attention %s (%d runs), Based %s (%d runs), value filter", ms(v_att), #v_att, ms(v_based), #v_based),
      "agrees" },
    { "spec §8.2.1", "The best Mamba, Hyena and H3 models do direct retrieval in layer 0 (at the query)", "@ Query ≈ 1",
      string.format("H3 @ Query %s (%d run%s); Hyena (%s) unfiltered @ Query %s (d = 32), %s (d = 64); Mamba @ Query %s, @ Key %s",
        ms(field(q_h3, "query")), #q_h3, #q_h3 == 1 and "" or "s",
        #of_arch(s.ar_query, "hyena") == 0 and "no run passes" or (#of_arch(s.ar_query, "hyena") .. " pass"),
        ms(hy_q32), ms(hy_q64), ms(field(q_mamba, "query")), ms(field(q_mamba, "key")))
        .. (sliced("mamba") and string.format("; Mamba at its best lr, unfiltered: @ Query %s / %s, @ Key %s / %s (d = 32 / 64)",
          ms(field(best("mamba", 32).runs, "query")), ms(field(best("mamba", 64).runs, "query")),
          ms(field(best("mamba", 32).runs, "key")), ms(field(best("mamba", 64).runs, "key"))) or ""),
      v256.retrieval or mamba_retrieval },
    { "spec §8.2.1", "Weaker SSM checkpoints split query and key; Mamba's lie near @ Query + @ Key ≈ 1", "Q + K ≈ 1",
      string.format("Mamba Q + K %s (%d runs)", ms(qk), #qk), "agrees" },
    { "spec §8.2.1", "The only BaseConv checkpoint that passes the filter shows partial induction", "one run, partial @ Value",
      #bc == 1 and string.format("one run passes at the query (d = %d, seed %d: @ Query %s, @ Key %s, unfiltered @ Value %s); none at the value",
        bc[1].d, bc[1].seed, num(bc[1].query), num(bc[1].key), num(bc[1].value)) or (#bc .. " runs"),
      "agrees in direction: one run passes, as in the paper, but at the query's filter, not the value's: " ..
      "its @ Value is unfiltered" },
    -- spec §8.2.2 and the ATR headline
    { "spec §8.2.2", "ATR (5, 20): every architecture between ≈70 % and 97 %; Mamba matches or beats the others",
      "70–97 %, Mamba best", string.format("%s–%s; Mamba %s (d = 32 / 64), the best at both", num(atr_lo, 2), num(atr_hi, 2),
        atr_acc(s, "mamba")), "agrees in direction: Mamba the best at both widths; at d = 32 some architectures are below 70 %" },
    { "spec §8.2.2", "Mamba matches or beats every architecture at every width when \\|Σ\\| = 20, most clearly at L_max = 10",
      "Mamba best", string.format("Mamba ahead of the next by (d = 32 / 64): (5, 20) %s / %s; (10, 20) %s / %s",
        lead(atr5, "mamba", 32), lead(atr5, "mamba", 64), lead(s.hard.pcfg_10_20, "mamba", 32), lead(s.hard.pcfg_10_20, "mamba", 64)),
      "agrees: the best at both settings and both widths, by more at (10, 20) (its runs had 5 epochs, (5, 20)'s 32)" },
    { "spec §8.2.2", "Attention beats Mamba only at \\|Σ\\| = 8192 with d ≤ 64", "Attention > Mamba at 8192",
      string.format("(5, 8192), d = 32 / 64: Attention %s, Mamba %s, Based %s", hard_acc("pcfg_easy_8192", "attention"),
        hard_acc("pcfg_easy_8192", "mamba"), hard_acc("pcfg_easy_8192", "based")),
      "disagrees at this scale: Mamba beats Attention at (5, 8192) too, Based is the best there; 5 epochs, one lr: " ..
      settle.atr_hard },
    { "spec §8.2.2", "Longer rules do not hurt Mamba", "(10, 20) ≈ (5, 20)",
      string.format("Mamba (5, 20) %s (32 epochs), (10, 20) %s (5 epochs), the best at (10, 20)", atr_acc(s, "mamba"),
        hard_acc("pcfg_10_20", "mamba")),
      NS .. " (the two settings were trained for 32 and 5 epochs): " .. settle.atr_easy5 },
    { "spec §8.2.2", "Attention, Based and BaseConv mainly use induction on ATR", "@ Value high",
      string.format("@ Value (d = 32 / 64): Attention %s, Based %s, BaseConv %s at (5, 20); %s, %s, %s at (5, 8192); " ..
        "%s, %s, %s at (10, 20)", atr_attrib("attention", "value"), atr_attrib("based", "value"), atr_attrib("base_conv", "value"),
        hard_attrib("pcfg_easy_8192", "attention", "value"), hard_attrib("pcfg_easy_8192", "based", "value"),
        hard_attrib("pcfg_easy_8192", "base_conv", "value"), hard_attrib("pcfg_10_20", "attention", "value"),
        hard_attrib("pcfg_10_20", "based", "value"), hard_attrib("pcfg_10_20", "base_conv", "value")),
      "agrees for Based in every setting; for Attention only at d = 64 on (5, 20) and (5, 8192) (at d = 32 and on " ..
      "(10, 20) it retrieves at the query, in layer 0: @ Query " .. hard_attrib("pcfg_10_20", "attention", "query") ..
      " at (10, 20)); for BaseConv partly at \\|Σ\\| = 20 and not at 8192 (@ Key " ..
      hard_attrib("pcfg_easy_8192", "base_conv", "key") .. ": layer-1 direct retrieval)" },
    { "spec §8.2.2", "Hyena, H3 and Mamba use direct retrieval on ATR", "@ Value ≈ 0",
      string.format("@ Value: Hyena %s, H3 %s, Mamba %s at (5, 20); at most %s in the other two settings",
        atr_attrib("hyena", "value"), atr_attrib("h3", "value"), atr_attrib("mamba", "value"), num(max_hard_value)), "agrees" },
    { "spec §8.2.2", "At \\|Σ\\| = 8192 the direct-retrieval SSMs retrieve in layer 1 (@ Key); otherwise they mix @ Key and @ Query",
      "@ Key at 8192, mix at \\|Σ\\| = 20", string.format("@ Query / @ Key at d = 32 and d = 64, (5, 8192): %s, %s, %s; " ..
        "(10, 20): %s, %s, %s", qk_of("pcfg_easy_8192", "hyena"), qk_of("pcfg_easy_8192", "h3"), qk_of("pcfg_easy_8192", "mamba"),
        qk_of("pcfg_10_20", "hyena"), qk_of("pcfg_10_20", "h3"), qk_of("pcfg_10_20", "mamba")),
      "agrees for Mamba and H3 (8192: mostly @ Key; \\|Σ\\| = 20: mixed, as at (5, 20)); Hyena retrieves at the query " ..
      "at \\|Σ\\| = 20 and is split at 8192 (d = 32 @ Key, d = 64 @ Query)" },
    { "spec §8.2.2", "Mamba is highly accurate without induction", "high accuracy, @ Value ≈ 0",
      string.format("accuracy %s, @ Value %s (d = 32 / 64) at (5, 20); %s and %s at (10, 20)", atr_acc(s, "mamba"),
        atr_attrib("mamba", "value"), hard_acc("pcfg_10_20", "mamba"), hard_attrib("pcfg_10_20", "mamba", "value")), "agrees" },
    -- spec §8.2.3
    { "spec §8.2.3", "Mamba reaches the highest dev accuracy; Attention the highest test accuracy (d ≥ 32)",
      "best dev: Mamba; best test: Attention",
      string.format("the most accurate (d = 32 / 64): dev %s / %s, test %s / %s; Mamba dev %s, Attention test %s",
        split_best("dev", 32), split_best("dev", 64), split_best("test", 32), split_best("test", 64),
        split_acc("mamba", "dev"), split_acc("attention", "test")),
      split_pending or verdict_split[18] },
    { "spec §8.2.3", "Mamba memorises (high dev for its test); H3 generalises nearly as Attention; BaseConv very little",
      "dev − test: Mamba high, H3 ≈ Attention, BaseConv low test",
      string.format("test (dev − test), d = 32 / 64: Attention %s, Mamba %s, H3 %s, BaseConv %s", split_gap("attention"),
        split_gap("mamba"), split_gap("h3"), split_gap("base_conv")),
      split_pending or verdict_split[19] },
    { "spec §8.2.3", "Mechanisms are the same on dev and test, except BaseConv (induction on dev, less on test)",
      "same Attrib on dev and test; BaseConv @ Value lower on test",
      string.format("@ Value dev → test, d = 32 / 64: Attention %s, Based %s, BaseConv %s; @ Query + @ Key: Hyena %s, H3 %s, Mamba %s",
        split_shift("attention", { "value" }), split_shift("based", { "value" }), split_shift("base_conv", { "value" }),
        split_shift("hyena", { "query", "key" }), split_shift("h3", { "query", "key" }), split_shift("mamba", { "query", "key" })),
      split_pending or verdict_split[20] },
    { "spec §8.2.3", "Induction is not more general than direct retrieval (Attention and Mamba generalise best)",
      "best test: Attention and Mamba",
      string.format("test accuracy, d = 32 / 64, best first at d = 64: %s", split_ranking()),
      split_pending or verdict_split[21] },
    -- spec §8.2.4
    { "spec §8.2.4", "Mamba: a step change between d_conv 1 and 2; without a short conv it fails AR", "< 7 % for d_conv 0, 1",
      string.format("d_conv 0, 1: at most %s; d_conv (d = 32 / 64) %s", num(low01, 3), table.concat(hi2, ", ")) ..
        (conv_best.acc_text or ""),
      conv_best.acc_verdict and ("at lr 1e-3 agrees in direction (none of 2–4 succeeds at d ≤ 64); " .. conv_best.acc_verdict)
        or ("agrees in direction (none of 2–4 succeeds at d ≤ 64, lr 1e-3): " .. (sliced("mamba") and settle.conv_lr or lr_left)) },
    { "spec §8.2.4", "Larger kernels move retrieval earlier: with d_conv 4 most checkpoints retrieve at the query",
      "d_conv 4: mostly @ Query", string.format("@ Query / @ Key: d_conv 2 %s / %s, 3 %s / %s, 4 %s / %s", q2, k2, q3, k3, q4, k4) ..
        (conv_best.attrib_text or ""),
      conv_best.attrib_verdict and ("at lr 1e-3 agrees in direction (only d_conv 4 has mass at the query), disagrees in " ..
        "degree; " .. conv_best.attrib_verdict)
        or ("agrees in direction (only d_conv 4 has mass at the query), disagrees in degree (mostly @ Key): " ..
        (sliced("mamba") and settle.conv_lr or lr_left)) },
    { "spec §8.2.4", "Based works with kernels 2–4 and fails with kernel 1 or a long conv (< 10 %)", "works / fails",
      string.format("kernels 2, 3, 4 at d = 64: %s; kernel 1 and long conv at most %s", table.concat(bk, ", "), num(bfail, 3)),
      "agrees" },
    { "spec §8.2.4", "Short convs are responsible for association in Mamba and Based; not sufficient (Hyena has one and fails)",
      "Hyena < 30 %", string.format("as the two rows above; Hyena at most %s", num(max_acc { s.ar.hyena[32], s.ar.hyena[64] }, 3)),
      "agrees" },
    -- appendix D
    { "D.1", "Attention fails AR without positional embeddings", "≈6 %", nope_claim(s) },
    { "D.1", "SSMs are generally worse with PE than without; on ATR, NoPE Attention beats PE Attention at small widths",
      "SSMs: PE < NoPE; ATR, small d: Attention NoPE > PE", "not run (the quick profiles train the main curves only)",
      NS .. ": the PE/NoPE pairs of the `ar` and `atr_easy` paper profiles" },
    { "D.2", "AR: 1-layer Mamba and Hyena do as well as 2-layer; 1-layer Attention and Based fail",
      "1 layer ≥ 2 (Mamba, Hyena); 1-layer Attention, Based fail", depth("ar_1layer", "ar_layers") },
    { "D.2", "ATR (5, 20): 1-layer Mamba, H3, Hyena stay strong, 1-layer Attention drops, 1-layer Based/BaseConv weakest",
      "1-layer SSMs ≈ 2-layer; Attention lower; Based/BaseConv lowest", depth("atr_1layer", "atr_1layer") },
    { "D.3", "3-layer AR accuracy ≈ 2-layer (Mamba at one small width excepted)", "3 layers ≈ 2 layers",
      depth("ar_3layer", "ar_layers") },
    { "D.3", "Mixer output at the query: which layer writes the answer, by depth and architecture",
      "1-layer SSMs: layer 0; 2 layers: Hyena 0, Mamba mostly 0, the others 1; 3 layers: Mamba 0 or last",
      depth("mixer", "ar_layers") },
    { "D.4", "Rightmost-sibling queries are trivial: every model does well, 1-layer Based/BaseConv lags",
      "all high; 1-layer Based/BaseConv lower", depth("sibling", "sibling") },
    -- v3
    { "spec §9.1", "AR: only Attention and Based fully succeed, Mamba and DeltaNet come close behind",
      "Attention, Based ≈100 %; Mamba, DeltaNet close",
      string.format("DeltaNet %s; Attention %s; Based %s; Mamba %s", accs_of(s.delta), accs(s, "attention"), accs(s, "based"),
        accs(s, "mamba")), dn_verdict },
    { "spec §9.1", "Attention and Based show induction, Mamba and DeltaNet direct retrieval",
      "@ Value ≈ 1 / ≈ 0",
      string.format("DeltaNet @ Value %s, @ Query %s, @ Key %s (%d runs, each position's filter); Attention, Based, Mamba " ..
        "as in the paper's section 5.1 above", ms(field(dn_v, "value")), ms(field(dn_q, "query")), ms(field(dn_k, "key")),
        #dn_all), dn_mech },
    { "spec §9.2", "Mamba implements induction through its short conv: restoring the next key at layer 0 restores the most",
      "next key largest", string.format("next key, block output: at most %s (%d filtered runs); @ Key block output %s (d_conv 2, 3, 4); conv output at the next key, d_conv 4: %s (mean)",
        num(nk_max), #nk_block, table.concat(key_block, ", "), num(nk4)) .. nk_best_text,
      nk_best_verdict or ("disagrees at this scale (one run, d = 64, d_conv 4, shows it inside the mixer): " ..
        (sliced("mamba") and settle.next_key or lr_left)) },
    { "spec §9.2", "Results are sensitive to the learning rate", "a neighbouring lr can fail completely",
      #cliffs > 0 and table.concat(cliffs, "; ") or string.format("no neighbouring rate fails (%d of the slice's %d runs)",
        s.slice_done, T.slice_runs),
      #cliffs > 0 and "agrees" or (s.slice_done == T.slice_runs and "disagrees at this scale" or (NS .. ": " .. lr_left)) },
    { "spec §9.3", "Mamba without a short conv learns Attention-like induction on ATR (@ Value high)", "@ Value high",
      conv_text, conv_verdict },
  }
end

tables.claims = function(s)
  local lines = { "| # | section | the paper's claim | the paper | mechlab (quick) | verdict |", "|---|---|---|---|---|---|" }
  for i, c in ipairs(claims(s)) do
    lines[#lines + 1] = row { tostring(i), c[1], c[2], c[3], c[4], c[5] }
  end
  return lines
end

T.ids = { "ar-accuracy", "ar-lr", "ar-attrib", "mamba-conv-accuracy", "mamba-conv-attrib", "next-key", "next-key-best-lr",
  "based-accuracy",
  "atr-easy", "atr-hard-accuracy", "atr-hard-attrib", "atr-split-accuracy", "atr-split-attrib", "delta-net", "atr-mamba-conv",
  "ar-layers", "ar-mixer-output", "atr-1layer", "sibling", "claims" }

--- Every table's text (its lines joined), by id.
function T.render(d)
  local s = stats(d)
  local out = {}
  for _, id in ipairs(T.ids) do out[id] = table.concat(tables[id](s), "\n") end
  return out
end

--- The page with each marked table replaced; also the ids whose text changed, and the ids the
--- page marks that no generator makes and those it lacks.
function T.apply(page, rendered)
  local changed, unknown, seen = {}, {}, {}
  local out = page:gsub("(<!%-%- table: ([%w%-]+) %-%->\n)(.-)(<!%-%- end table %-%->)", function(open, id, body, close)
    seen[id] = true
    local text = rendered[id]
    if not text then unknown[#unknown + 1] = id; return nil end
    text = "\n" .. text .. "\n\n" -- blank lines: the comments and the table are separate blocks
    if text ~= body then changed[#changed + 1] = id end
    return open .. text .. close
  end)
  local missing = {}
  for _, id in ipairs(T.ids) do if not seen[id] then missing[#missing + 1] = id end end
  return out, changed, unknown, missing
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then fail(tostring(err)) end
  local s = f:read("a")
  f:close()
  return s
end

--- Regenerates docs/reproduction.md's tables under root: with check, only compares. Returns true
--- when the page is (now) in step, and a list of messages (each differing, unknown or missing table).
function T.run(opts)
  opts = opts or {}
  local root = opts.root or "."
  local path = root .. "/docs/reproduction.md"
  local page = read(path)
  local out, changed, unknown, missing = T.apply(page, T.render(T.load(root)))
  local msgs = {}
  for _, id in ipairs(changed) do
    msgs[#msgs + 1] = "table '" .. id .. (opts.check and "' differs from the committed data" or "' rewritten")
  end
  for _, id in ipairs(unknown) do msgs[#msgs + 1] = "table '" .. id .. "' is marked on the page but no generator makes it" end
  for _, id in ipairs(missing) do msgs[#msgs + 1] = "table '" .. id .. "' has no marker on the page" end
  if not opts.check and #changed > 0 then
    local f = assert(io.open(path, "wb"))
    f:write(out)
    f:close()
    return #unknown + #missing == 0, msgs
  end
  return #msgs == 0, msgs
end

return T
