--- The committed data docs/reproduction.md's tables are made from: the report-step rows of each
--- quick sweep (docs/results/*.csv) and the CSVs of the figures the page shows
--- (docs/img/reproduction/*.csv). Part of mech.paper.tables (page.lua says how the page is made).
--- The rows of ar, mamba_conv, based_ablation and atr_easy carry no filter denominators
--- (attrib_den), so which of their runs pass the paper's 0.01 filter at a position is read from the
--- figure that plotted them (Fig. 3b: the value, Fig. 3c: the query,
--- Fig. 4b and 6b: each position): each plotted point is matched to its run by its values
--- (9 significant digits, as the figure CSVs are written), and the table takes the run's rows.
--- atr_hard's rows carry them; its filter is theirs, and Fig. 4b must plot exactly the runs it passes.
local sweep = require "mech.sweep"

local T = {}

-- the report-step rows of each sweep, by sweep name
T.results = { ar = "ar-quick.csv", mamba_conv = "mamba-conv-quick.csv", based_ablation = "based-ablation-quick.csv",
  atr_easy = "atr-easy-quick.csv", atr_hard = "atr-hard-quick.csv", atr_split = "atr-split-quick.csv",
  delta_net = "delta-net-quick.csv", ar_lr_slice = "ar-lr-slice.csv", ar_mamba_256 = "ar-mamba-256.csv",
  mamba_conv_best_lr = "mamba-conv-best-lr.csv", atr_mamba_conv = "atr-mamba-conv-quick.csv",
  ar_layers = "ar-layers-quick.csv", atr_1layer = "atr-1layer-quick.csv", sibling = "sibling-quick.csv",
  ar_nope = "ar-nope.csv", ar_layers_best = "ar-layers-based-best-lr.csv", ar_pe = "ar-pe-pairs.csv",
  ar_bf16 = "ar-bf16-64.csv", ar_mamba_seeds = "ar-mamba-seeds-64.csv",
  atr_pe = "atr-easy-pe-pairs.csv", atr_hard32 = "atr-hard-quick32.csv", atr_hard_nope = "atr-hard-nope-pair.csv" }
-- the learning rates of AR's quick profile (1e-3) and its slice (the other three), and the slice's own runs
T.lrs = { 3e-4, 1e-3, 3e-3, 1e-2 }
T.slice_runs = 36
-- the documents a report step was evaluated on, where its rows do not say (a column or metric
-- `eval_docs`): every quick run committed before the suites recorded it used the first 320
T.eval_docs = 320
-- the figure CSVs read for the filter and for sites the rows do not hold
T.filter_csv = "docs/img/reproduction/filter.csv"
T.figure_csvs = { "fig3b", "fig3c", "fig4b", "fig6b", "v3_next_key", "mamba_next_key", "mamba_next_key_best_lr_runs",
  "v3_atr_mamba_conv" }

local function fail(msg) error("paper tables: " .. msg, 0) end

-- the two settings of `atr_hard`, as Fig. 4 titles them
T.hard_settings = { { preset = "pcfg_easy_8192", title = "(5, 8192)" }, { preset = "pcfg_10_20", title = "(10, 20)" } }

-- does a run pass the paper's 0.01 filter at a position, by its own denominator (nil: not recorded)
local function passes_at(e, pos)
  local den = e and e[pos .. "_den"]
  if den == nil then return nil end
  return den > 0.01
end

-- a layer-1 block-input Attrib row's position and what it holds (attrib, attrib_den, attrib_se);
-- the query type (KEY on AR, PARENT on ATR) does not matter here
local BLOCK_INPUT = "^1%.%u+%.query_item_orig%.([%w_]+)%.block_input%.(attrib[_%a]*)$"

-- Attrib's standard errors for runs whose rows predate them: FILE-attrib-se.csv beside a sweep's
-- rows (experiments/attrib_se.lua reruns the report step's evaluation). Its Attrib must be the
-- rows' own (the same evaluation), else its errors belong to another one.
function T.errors_file(file) return (file:gsub("%.csv$", "-attrib-se.csv")) end

local function read_errors(root, file, runs, pos_of)
  local path = root .. "/docs/results/" .. T.errors_file(file)
  if not mech.sys.exists(path) then return end
  local se_file = path:match("[^/]+$")
  for _, r in ipairs(sweep.results(path)) do
    local p, what = r.metric:match(BLOCK_INPUT)
    local e = runs[r.run]
    if p and pos_of[p] and r.step_kind == "report" and r.split == "test" then
      if not e then fail(se_file .. ": run " .. r.run .. " is not in " .. file) end
      local pos = pos_of[p]
      if what == "attrib" and not (e[pos] and math.abs(r.value - e[pos]) <= 1e-6) then
        fail(string.format("%s: run %s's Attrib at %s (layer 1) is %.9g, its rows say %s: the errors are of another evaluation",
          se_file, r.run, p, r.value, tostring(e[pos])))
      elseif what == "attrib_se" then e[pos .. "_se"] = r.value end
    end
  end
end

--- The data the tables are made from, under root (the repository; default "."):
--- {runs = {sweep = {by id}}, ids = {sweep = {ids in file order}}, rows = {sweep = {report rows}},
--- fig = {id = rows}}. A run's entry
--- has its test accuracy, the documents it was evaluated on (n), and Attrib (value, query, key) and, where the rows carry them, the filter
--- denominators (value_den, query_den, key_den; the later sweeps' rows have them), Attrib's
--- standard errors (value_se, query_se, key_se: later rows, or FILE-attrib-se.csv) and its task;
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
            n_layers = r.n_layers, precision = r.precision ~= "" and r.precision or nil, long = r.run:find("long_only=true", 1, true) ~= nil, task = r.task, mixer = {}, mixer_den = {} }
          runs[r.run], ids[#ids + 1] = e, r.run
        end
        if r.split == "dev" then e.dev = e.dev or {} end
        local t = r.split == "dev" and e.dev or e
        -- a report row counts report_docs documents where the run set them (docs/training.md)
        t.n = tonumber(r.eval_docs) or tonumber(r.report_docs) or t.n or T.eval_docs
        local p, what = r.metric:match(BLOCK_INPUT)
        local layer, mixer = r.metric:match("^(%d)%.%u+%.query_item_orig%.query_item%.attention_output%.(attrib[_den]*)$")
        if r.metric == "accuracy" then t.accuracy = r.value
        elseif r.metric == "eval_docs" then t.n = r.value
        elseif p and pos_of[p] and what == "attrib" then t[pos_of[p]] = r.value
        elseif p and pos_of[p] and (what == "attrib_den" or what == "attrib_se") then t[pos_of[p] .. what:sub(7)] = r.value
        elseif layer and r.split == "test" then
          e[mixer == "attrib" and "mixer" or "mixer_den"][tonumber(layer)] = r.value
        end
      end
    end
    read_errors(root, file, runs, pos_of)
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


T.fail, T.passes_at = fail, passes_at

return T
