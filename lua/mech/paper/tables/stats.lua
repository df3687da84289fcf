--- The runs behind each table and claim, selected once from the loaded data (load.lua): which
--- runs a figure plotted, which pass the filter, the cells per architecture and width. Part of
--- mech.paper.tables.
local paper = require "mech.paper"
local load = require "mech.paper.tables.load"
local F = require "mech.paper.tables.format"

local T, fail, passes_at = load, load.fail, load.passes_at
local g9, num, mean_of = F.g9, F.num, F.mean_of

local S = {}

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
    -- a panel "@Key  (5, 8192), 32 ep." is of the setting "(5, 8192)"
    if pos and (not setting or r.panel:match("^@%a+  (%b())") == setting) then
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
  -- the AR slice's best rates at d = 64 trained with bf16 products (ar's bf16_64, issue 46): one run each
  s.ar_bf16 = {}
  for _, a in ipairs(paper.archs) do s.ar_bf16[a] = pick(d, { "ar_bf16" }, arch_is(a))[1] end
  -- Mamba at d = 64, lr 3e-3 by seed in each precision (ar's mamba_seeds_64, issue 46): seed 42 is
  -- the slice's fp32 run and bf16_64's run, seeds 43-45 the profile's own
  s.mamba_seeds = { fp32 = {}, bf16 = {} }
  for _, e in ipairs(s.ar_lr.mamba and s.ar_lr.mamba[64][3e-3] or {}) do s.mamba_seeds.fp32[#s.mamba_seeds.fp32 + 1] = e end
  if s.ar_bf16.mamba then s.mamba_seeds.bf16 = { s.ar_bf16.mamba } end
  for _, e in ipairs(pick(d, { "ar_mamba_seeds" })) do
    local list = s.mamba_seeds[e.precision or "fp32"]
    list[#list + 1] = e
  end
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
  -- the filter denominators. hard32: the same runs at the paper's 32 epochs (`atr_hard`'s quick32
  -- profile, issue 42's block 4), as far as they have run: the cells read them where they exist
  -- (cells.lua, C.hard)
  local function per_setting(name)
    local out = {}
    for _, st in ipairs(T.hard_settings) do
      out[st.preset] = {}
      for _, a in ipairs(paper.archs) do
        out[st.preset][a] = {}
        for _, w in ipairs { 32, 64 } do
          out[st.preset][a][w] = pick(d, { name }, function(e)
            return e.arch == a and e.d == w and e.task:find(st.preset .. "-", 1, true) == 1 end)[1]
        end
      end
    end
    return out
  end
  s.hard, s.hard32 = per_setting("atr_hard"), per_setting("atr_hard32")
  -- what Fig. 4 and the atr_hard tables show of a setting: its runs at 32 epochs once they cover
  -- all its runs at 5, else those (the figures' rule, paper.longest_trained); hard_runs: those
  -- runs, hard_sweep: whose
  s.hard_view, s.hard_epochs, s.hard_runs, s.hard_sweep = {}, {}, {}, {}
  local both = {}
  for _, n in ipairs { "atr_hard", "atr_hard32" } do for _, r in ipairs(d.rows[n]) do both[#both + 1] = r end end
  for _, st in ipairs(T.hard_settings) do
    local rows, steps = paper.longest_trained(both, function(r) return paper.task_is(r, st.preset) end)
    local long = rows[1] ~= nil and d.runs.atr_hard32[rows[1].run] ~= nil
    s.hard_view[st.preset], s.hard_epochs[st.preset] = long and s.hard32[st.preset] or s.hard[st.preset], steps and paper.epochs(steps)
    s.hard_sweep[st.preset] = long and "atr_hard32" or "atr_hard"
    s.hard_runs[st.preset] = pick(d, { s.hard_sweep[st.preset] }, function(e) return e.task:find(st.preset .. "-", 1, true) == 1 end)
  end
  s.hard_total = #s.hard_runs.pcfg_easy_8192 + #s.hard_runs.pcfg_10_20
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
    local plotted = box_runs(d, "fig4b", { s.hard_sweep[st.preset] }, function(g)
      return where_all(by_name(g), function(e) return e.task:find(st.preset .. "-", 1, true) == 1 end) end, st.title)
    for _, pos in ipairs { "value", "query", "key" } do
      local got = in_set(plotted[pos] or {})
      for _, e in ipairs(s.hard_runs[st.preset]) do
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
  -- 3 layers at rates of their own (ar_layers' profile based_best_lr: 3-layer Based at 2-layer
  -- Based's best rates of the slice, on 1,024 documents): the best per width, as ar_best picks
  s.layers_best = {}
  for _, a in ipairs(paper.archs) do
    s.layers_best[a] = {}
    for _, w in ipairs { 32, 64 } do
      for _, e in ipairs(pick(d, { "ar_layers_best" }, function(e) return e.arch == a and e.d == w end)) do
        local b = s.layers_best[a][w]
        if e.accuracy and (not b or e.accuracy > b.accuracy) then s.layers_best[a][w] = e end
      end
    end
  end
  s.atr_layers = by_depth({ "atr_1layer", "atr_easy" }, { 1, 2 })
  s.sibling = by_depth({ "sibling", "sibling", "sibling" }, { 1, 2, 3 })
  s.layers_total, s.atr_1layer_total, s.sibling_total = #d.ids.ar_layers, #d.ids.atr_1layer, #d.ids.sibling
  -- Attention without positions on AR (`ar`'s nope slice), per width
  s.ar_nope = {}
  for _, w in ipairs { 32, 64 } do
    s.ar_nope[w] = pick(d, { "ar_nope" }, function(e) return e.arch == "attention" and not e.pos_emb and e.d == w end)
  end
  -- the other five with positions on AR (`ar`'s pe_pairs profile, lr 1e-3 as the quick
  -- profile's NoPE runs, on 1,024 documents), per architecture and width
  -- the other member of each ATR (5, 20) PE/NoPE pair (`atr_easy`'s pe_pairs profile: Attention
  -- without positions, the rest with them; lr 1e-3 and 32 epochs, as the quick runs)
  s.atr_pe = {}
  for _, a in ipairs(paper.archs) do
    s.atr_pe[a] = {}
    for _, w in ipairs { 32, 64 } do
      s.atr_pe[a][w] = pick(d, { "atr_pe" }, function(e) return e.arch == a and e.d == w end)[1]
    end
  end
  -- Attention without positions on (10, 20) (`atr_hard`'s nope_pair profile: 32 epochs, lr 1e-3),
  -- the partner of quick32's Attention with positions
  s.hard_nope = {}
  for _, w in ipairs { 32, 64 } do
    s.hard_nope[w] = pick(d, { "atr_hard_nope" }, function(e) return e.arch == "attention" and not e.pos_emb and e.d == w end)[1]
  end
  s.ar_pe = {}
  for _, a in ipairs(paper.archs) do
    s.ar_pe[a] = {}
    for _, w in ipairs { 32, 64 } do
      s.ar_pe[a][w] = pick(d, { "ar_pe" }, function(e) return e.arch == a and e.pos_emb and e.d == w end)
    end
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
      e = { id = r.run, d = r.d_model, lr = r.lr, accuracy = r.accuracy, n = tonumber(r.eval_docs) or tonumber(r.report_docs) or T.eval_docs, at = {},
        pass = {} }
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

-- the runs of list that pass the filter at pos by their own denominators
local function passing_own(list, pos)
  local out = {}
  for _, e in ipairs(list) do if passes_at(e, pos) then out[#out + 1] = e end end
  return out
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
    parts[#parts + 1] = pass and (key == "accuracy" and F.acc1(e) or num(e[key], 2)) or "–"
  end
  return table.concat(parts, " / ")
end

local depth_order = { "attention", "based", "base_conv", "hyena", "h3", "mamba" }

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

local function nk(s, panel, conv) return s.next_key["@" .. panel .. "|conv " .. conv] or {} end

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

local order6 = { "attention", "based", "base_conv", "hyena", "h3", "mamba" }

-- the run of an ATR split cell on a split ("dev" or "test"): its fields
local function on(e, split) return e and (split == "dev" and e.dev or e) or nil end

for k, v in pairs { pick = pick, field = field, arch_is = arch_is, arch_by_name = arch_by_name, arch_label = arch_label,
  of_arch = of_arch, in_set = in_set, where_all = where_all, ar_rows = ar_rows, compute = stats, passing = passing,
  concat = concat, passing_own = passing_own, pick_conv = pick_conv, per_width = per_width, depth_order = depth_order,
  mixer_at = mixer_at, nk = nk, nk_positions = nk_positions, nk_sites = nk_sites, nk_argmax = nk_argmax, order6 = order6,
  on = on } do S[k] = v end

return S
