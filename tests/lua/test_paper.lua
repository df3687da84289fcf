-- The paper's suites and figures: the sweep files' grids, the selection helpers of mech.paper on
-- a hand-made results table, and `mechlab experiments/paper.lua --profile smoke` drawing every
-- figure with its CSV and index entry.
local T = require "check"
local paper = require "mech.paper"
local sweep = require "mech.sweep"

local function row(over)
  local r = { sweep = "s", status = "done", task = "ar_32", n_layers = 2, pos_emb = false, split = "test",
    step_kind = "report", step = 100, metric = "accuracy" }
  for k, v in pairs(over) do r[k] = v end
  r.run = r.run or string.format("%s-d%d-k%s-%s-lr%g-s%d", r.arch, r.d_model, tostring(r.d_conv), tostring(r.pos_emb), r.lr, r.seed)
  return r
end

T.test("mean_sd: the mean and the sample standard deviation; fmt_mean writes mean ± sd", function()
  local m, sd = paper.mean_sd { 0.2, 0.4 }
  T.near(m, 0.3, 1e-12)
  T.near(sd, math.sqrt(0.02), 1e-12)
  local m1, sd1 = paper.mean_sd { 0.7 }
  T.eq(m1, 0.7)
  T.eq(sd1, 0)
  T.eq(paper.fmt_mean({ 0.2, 0.4 }, 2), "0.30 ± 0.14")
  T.eq(paper.fmt_mean({ 0.25 }, 2), "0.25")
end)

T.test("best_per_width: the learning rate with the best mean over seeds, not the best single run", function()
  local rows = {
    -- attention d16: lr 1e-3 has the best single run (0.9) but mean 0.5; lr 3e-3 has mean 0.6
    row { arch = "attention", pos_emb = true, d_model = 16, lr = 1e-3, seed = 42, value = 0.9 },
    row { arch = "attention", pos_emb = true, d_model = 16, lr = 1e-3, seed = 43, value = 0.1 },
    row { arch = "attention", pos_emb = true, d_model = 16, lr = 3e-3, seed = 42, value = 0.5 },
    row { arch = "attention", pos_emb = true, d_model = 16, lr = 3e-3, seed = 43, value = 0.7 },
    row { arch = "mamba", d_model = 32, lr = 1e-3, seed = 42, value = 0.2 },
    row { arch = "mamba", d_model = 32, lr = 1e-3, seed = 43, value = 0.4 },
    row { arch = "mamba", d_model = 16, lr = 1e-3, seed = 42, value = 0.05 },
    -- another split and another step kind must not count
    row { arch = "mamba", d_model = 32, lr = 3e-3, seed = 42, value = 1, split = "dev" },
    row { arch = "mamba", d_model = 32, lr = 3e-3, seed = 42, value = 1, step_kind = "best" },
    row { arch = "mamba", d_model = 32, lr = 3e-3, seed = 42, value = 1, metric = "loss" },
  }
  local best, widths, archs = paper.best_per_width(rows)
  T.eq(widths, { 16, 32 })
  T.eq(archs, { "attention", "mamba" })
  T.eq(best.attention[16].lr, 3e-3)
  T.near(best.attention[16].mean, 0.6, 1e-12)
  T.near(best.attention[16].sd, math.sqrt(0.02), 1e-12)
  T.eq(best.attention[16].n, 2)
  T.eq(best.mamba[32].lr, 1e-3)
  T.near(best.mamba[32].mean, 0.3, 1e-12)
  T.eq(best.mamba[16].n, 1)
  local keys = paper.accuracy_keys(best, widths, archs)
  T.eq(keys[1], "Attention: d=16 0.600 ± 0.141 (lr 0.003, 2 seeds)")
  T.eq(keys[2], "Mamba: d=16 0.050 (lr 0.001), d=32 0.300 ± 0.141 (lr 0.001, 2 seeds)")
  -- the dev split chooses by dev accuracy
  local dev = paper.best_per_width(rows, { split = "dev" })
  T.eq(dev.mamba[32].lr, 3e-3)
  T.eq(dev.attention, nil)
end)

T.test("main_curve pools Attention's NoPE runs at AR's extra learning rates; groups pick the best", function()
  local rows = {
    row { arch = "attention", pos_emb = true, d_model = 16, lr = 3e-3, seed = 42, value = 0.4 },
    row { arch = "attention", pos_emb = false, d_model = 16, lr = 1e-2, seed = 42, value = 0.8 },
    row { arch = "attention", pos_emb = false, d_model = 16, lr = 3e-3, seed = 42, value = 0.95 }, -- NoPE at LR5: out
    row { arch = "mamba", pos_emb = true, d_model = 16, lr = 3e-3, seed = 42, value = 0.99 },       -- PE Mamba: out
    row { arch = "mamba", pos_emb = false, d_model = 16, lr = 3e-3, seed = 42, value = 0.3 },
  }
  local best = paper.best_per_width(rows, { where = paper.main_curve })
  T.eq(best.attention[16].lr, 1e-2)
  T.near(best.attention[16].mean, 0.8, 1e-12)
  T.near(best.mamba[16].mean, 0.3, 1e-12)
  -- grouping by conv width, the default Mamba's empty d_conv read as 4
  rows = {
    row { arch = "mamba", d_model = 16, lr = 3e-3, seed = 42, value = 0.7 },
    row { arch = "mamba", d_model = 16, d_conv = 0, lr = 3e-3, seed = 42, value = 0.02 },
  }
  local by_conv, _, convs = paper.best_per_width(rows, { group = paper.mamba_conv })
  T.eq(convs, { 0, 4 })
  T.near(by_conv[4][16].mean, 0.7, 1e-12)
end)

T.test("attrib_by_group: the 0.01 filter per run, every query type read as KEY, all runs when none passes", function()
  local label = paper.attrib_label("value")
  T.eq(label, "1.KEY.query_item_orig.target_item_orig.block_input")
  local function attrib(run, arch, den, value, typ)
    local l = label:gsub("KEY", typ or "KEY")
    return row { run = run, arch = arch, d_model = 16, lr = 1e-3, seed = 42, metric = l .. ".attrib_den", value = den },
      row { run = run, arch = arch, d_model = 16, lr = 1e-3, seed = 42, metric = l .. ".attrib", value = value }
  end
  local rows = {}
  for _, spec in ipairs {
    { "a1", "attention", 0.5, 0.9 }, { "a2", "attention", 0.005, -3 }, { "m1", "mamba", 0.02, 0.1, "PARENT" },
    { "m2", "mamba", 0.3, 0 / 0 },
  } do
    local d, v = attrib(table.unpack(spec))
    rows[#rows + 1], rows[#rows + 2] = d, v
  end
  local by, n, filtered, groups = paper.attrib_by_group(rows, label)
  T.eq(filtered, true)
  T.eq(n, 2) -- a2 is filtered out, m2 has no finite Attrib
  T.eq(groups, { "attention", "mamba" })
  T.eq(by.attention, { 0.9 })
  T.eq(by.mamba, { 0.1 })
  -- no run passes: every run is shown, and the caller is told
  local low = {}
  for i = 1, 2 do local d, v = attrib("x" .. i, "h3", 0.001, i / 10); low[#low + 1] = d; low[#low + 1] = v end
  by, n, filtered = paper.attrib_by_group(low, label)
  T.eq(filtered, false)
  T.eq(n, 2)
  -- a box figure with a panel of filtered runs and an empty one (a sweep not run yet) still
  -- applies the filter; with only unfiltered runs it says so
  local base = os.tmpname()
  local png = base .. ".png"
  local _, unfiltered = paper.attrib_boxes({ { title = "a", rows = rows }, { title = "b", rows = {} } }, { "value" }, png)
  T.eq(unfiltered, false)
  _, unfiltered = paper.attrib_boxes({ { title = "a", rows = low }, { title = "b", rows = {} } }, { "value" }, png)
  T.eq(unfiltered, true)
  for _, f in ipairs { base, png, base .. ".csv" } do os.remove(f) end
  -- threshold = false: no filter at all
  by, n = paper.attrib_by_group(rows, label, { threshold = false })
  T.eq(n, 3)
  -- the attribution of chosen runs (AR labels only: m1's PARENT label is not read)
  T.eq(paper.attrib_of_runs(rows, { "a1", "a2", "m1" }, "value"), { 0.9, -3 })
  T.eq(paper.scatter_keys({ { label = "Based", x = { 0.9, 1.1 }, y = { 0, 0 } }, { label = "H3", x = {}, y = {} } },
    "@Value", "@Query"), { "Based: @Value 1.00 ± 0.14, @Query 0.00 ± 0.00 (2 runs)" })
end)

T.test("the recorded filter stands in for missing denominators; conv_style and the selection caption", function()
  local label = paper.attrib_label("value")
  local rows = {
    row { run = "a1", arch = "attention", d_model = 16, lr = 1e-3, seed = 42, metric = label .. ".attrib", value = 0.9 },
    row { run = "a2", arch = "attention", d_model = 16, lr = 1e-3, seed = 43, metric = label .. ".attrib", value = 0.2 },
  }
  local by, n, filtered = paper.attrib_by_group(rows, label)
  T.eq(filtered, false) -- no denominators, no record: every run shown
  T.eq(n, 2)
  local base = os.tmpname()
  local file = base .. ".csv"
  mech.sys.write_atomic(file, "sweep,run,position,attrib\nar,a1,value,0.9\n")
  paper.use_recorded_filter(file)
  by, n, filtered = paper.attrib_by_group(rows, label)
  T.eq(filtered, true)
  T.eq(by.attention, { 0.9 })
  -- a run's own denominator wins over the record; a run without one keeps the record's verdict
  rows[#rows + 1] = row { run = "a2", arch = "attention", d_model = 16, lr = 1e-3, seed = 43, metric = label .. ".attrib_den", value = 1 }
  by = paper.attrib_by_group(rows, label)
  T.eq(by.attention, { 0.9, 0.2 })
  mech.sys.write_atomic(file, "sweep,run,position,attrib\nar,a1,value,0.9\nar,a2,value,0.2\n")
  paper.use_recorded_filter(file)
  rows[#rows].value = 0.005 -- a2 fails by its own denominator, though recorded
  by = paper.attrib_by_group(rows, label)
  T.eq(by.attention, { 0.9 })
  paper.recorded_filter = nil
  os.remove(file)
  os.remove(base)
  T.eq({ paper.conv_style(0) }, { mech.plot.color("blues", 0, 5), "circle" })
  T.eq({ paper.conv_style("4") }, { mech.plot.color("blues", 4, 5), "triangle_down" })
  T.eq(paper.conv_style(7), nil)
  local acc = {
    row { run = "x1", arch = "h3", d_model = 32, lr = 1e-3, seed = 42, value = 0.5 },
    row { run = "x2", arch = "h3", d_model = 32, lr = 1e-3, seed = 43, value = 0.7 },
    row { run = "x3", arch = "h3", d_model = 32, lr = 3e-3, seed = 42, value = 0.1 },
    row { run = "x4", arch = "h3", d_model = 32, lr = 3e-3, seed = 43, value = 0.2 },
  }
  T.eq(paper.selection_caption(acc, paper.best_per_width(acc)),
    "best lr per cell of 0.001, 0.003 (taken: 0.001); seeds 42, 43: faded points each seed, line the mean")
end)

T.test("a profile with its slices: every file's rows, a run already read skipped in the later files", function()
  local base = os.tmpname()
  local a, b, missing = base .. "-a.csv", base .. "-b.csv", base .. "-missing.csv"
  local head = "sweep,run,status,task,arch,n_layers,d_model,d_conv,pos_emb,lr,seed,steps,split,metric,step_kind,step,value\n"
  mech.sys.write_atomic(a, head .. "ar,r1,done,ar_32,h3,2,32,,false,0.001,42,100,test,accuracy,report,100,0.5\n")
  mech.sys.write_atomic(b, head .. "ar,r1,done,ar_32,h3,2,32,,false,0.001,42,100,test,accuracy,report,100,0.9\n"
    .. "ar,r2,done,ar_32,h3,2,32,,false,0.003,42,100,test,accuracy,report,100,0.7\n")
  local rows = paper.results({ ar = { a, b } }, "ar")
  T.eq(#rows, 2)
  T.eq({ rows[1].run, rows[1].value, rows[2].run, rows[2].value }, { "r1", 0.5, "r2", 0.7 })
  T.eq(#paper.results({ ar = { a, missing } }, "ar"), 1) -- a slice not run yet adds nothing
  T.truthy(paper.has_results { a, missing })
  T.falsy(paper.has_results { missing, a }) -- the profile's own rows decide
  -- asked for a metric, a run comes whole from the first file whose rows of it hold one: r1 from b,
  -- accuracy included (no mixing of two trainings), r2 from b as before
  local mixer = "ar,r1,done,ar_32,h3,2,32,,false,0.001,42,100,test,0.KEY.query_item_orig.query_item.attention_output.attrib,report,100,0.8\n"
  mech.sys.write_atomic(b, mech.sys.read_file(b) .. mixer)
  rows = paper.results({ ar = { a, b } }, "ar", "attention_output")
  T.eq(#rows, 3)
  T.eq({ rows[1].run, rows[1].value, rows[2].run, rows[3].run, rows[3].value }, { "r1", 0.9, "r2", "r1", 0.8 })
  T.eq(#paper.results({ ar = { a, b } }, "ar"), 2) -- without it, as before
  mech.sys.write_atomic(a, mech.sys.read_file(a) .. mixer) -- the first file holds it too: a stands
  rows = paper.results({ ar = { a, b } }, "ar", "attention_output")
  T.eq({ #rows, rows[1].value, rows[2].value, rows[3].run }, { 3, 0.5, 0.8, "r2" })
  for _, f in ipairs { a, b, base } do os.remove(f) end
  -- the AR curves' recipes take the learning-rate slice at the quick profile, Fig. 3a-c the d = 256 run too,
  -- Fig. 6a the conv ablation at Mamba's best rate, Fig. 7 Attention without positions, Fig. 9b the
  -- slice's second training of the 2-layer runs for the mixer output
  for _, f in ipairs(paper.figures) do
    local want = f.id == "v3_lr_heatmap" and { quick = { ar = { "lr_slice" } } } or {}
    if f.id:match("^fig3[abc]$") then want = { quick = { ar = { "lr_slice", "mamba_256" } } } end
    if f.id == "fig6a" then want = { quick = { ar = { "lr_slice", "mamba_256" }, mamba_conv = { "best_lr" } } } end
    if f.id == "fig7" then -- every further profile of its three sweeps, where PE/NoPE pairs may come from
      want = { quick = { ar = { "best_lr_128", "best_lr_256", "lr_slice", "mamba_256", "nope", "pe_pairs" },
        atr_easy = { "pe_pairs" }, atr_hard = { "nope_pair", "quick32" } } }
    end
    if f.id == "fig9b" then want = { quick = { ar = { "lr_slice" } } } end
    if f.id:match("^fig4[ab]$") then want = { quick = { atr_hard = { "quick32" } } } end
    T.eq(f.slices, want, f.id)
  end
end)

T.test("longest_trained: a setting's longer runs once they cover all its cells, else its shorter; atr_settings names the epochs", function()
  local function run(arch, d, steps, v)
    return row { sweep = "atr_hard", task = "pcfg_10_20-t42-numpy", arch = arch, d_model = d, lr = 1e-3, seed = 42,
      steps = steps, value = v, run = string.format("%s-d%d-%d", arch, d, steps) }
  end
  local rows = { run("h3", 32, 15630, 0.5), run("h3", 64, 15630, 0.6), run("h3", 32, 100032, 0.8),
    row { sweep = "atr_hard", task = "pcfg_easy_8192-t42-numpy", arch = "h3", d_model = 32, lr = 1e-3, seed = 42, steps = 15630, value = 0.4 } }
  local function on_10_20(r) return paper.task_is(r, "pcfg_10_20") end
  local got, steps = paper.longest_trained(rows, on_10_20)
  T.eq({ #got, got[1].value, got[2].value, steps }, { 2, 0.5, 0.6, 15630 }) -- d = 64 has no 32-epoch run yet
  rows[#rows + 1] = run("h3", 64, 100032, 0.9)
  got, steps = paper.longest_trained(rows, on_10_20)
  T.eq({ #got, got[1].value, got[2].value, steps }, { 2, 0.8, 0.9, 100032 })
  T.eq({ paper.epochs(15630), paper.epochs(100032) }, { 5, 32 })
  T.eq({ paper.longest_trained(rows, function() return false end) }, { {} })
  local st = paper.atr_settings({}, rows)
  T.eq({ st[1].title, st[2].title, st[3].title }, { "(5, 20)", "(5, 8192), 5 ep.", "(10, 20), 32 ep." })
  T.eq({ #st[1].rows, #st[2].rows, #st[3].rows, st[3].epochs, st[3].setting }, { 0, 1, 2, 32, "(10, 20)" })
end)

T.test("experiments/paper.lua --results draws from the committed rows: the committed figures' CSVs come back", function()
  local dir = os.tmpname()
  os.remove(dir)
  local figs = { "fig3a", "fig3b", "fig3c", "fig4a", "fig4b", "fig6a", "fig6b", "fig6c", "fig7", "fig8a", "fig8b", "fig9a",
    "fig9b", "fig10", "v3_lr_heatmap" }
  local ok = os.execute(string.format("%q experiments/paper.lua --dir %q --results docs/results --filter "
    .. "docs/img/reproduction/filter.csv %s > %q 2>&1", arg[-1], dir, table.concat(figs, " "), dir .. ".log"))
  local log = mech.sys.read_file(dir .. ".log") or ""
  T.truthy(ok, log)
  T.falsy(log:find("sweep ", 1, true), "nothing runs: " .. log)
  for _, id in ipairs(figs) do
    T.eq(mech.sys.read_file(dir .. "/figures/" .. id .. ".csv"), mech.sys.read_file("docs/img/reproduction/" .. id .. ".csv"),
      id .. ".csv")
  end
  -- the quick profile's filter comes from the record: without it only the slices' runs, whose rows
  -- carry their denominators, can pass, and Fig. 3b counts them
  local quick, den = {}, 0
  for _, r in ipairs(sweep.results("docs/results/ar-quick.csv")) do quick[r.run] = true end
  for _, file in ipairs { "ar-lr-slice", "ar-mamba-256" } do
    for _, r in ipairs(sweep.results("docs/results/" .. file .. ".csv")) do
      if not quick[r.run] and r.metric == paper.attrib_label("value") .. ".attrib_den" and r.value > 0.01 then den = den + 1 end
    end
  end
  ok = os.execute(string.format("%q experiments/paper.lua --dir %q --results docs/results fig3b > %q 2>&1", arg[-1], dir,
    dir .. ".log"))
  T.truthy(ok)
  T.truthy(den > 0)
  T.truthy(mech.sys.read_file(dir .. "/figures/fig3b.md"):find(den .. " runs pass the 0.01 filter", 1, true), den)
  os.execute(string.format("rm -rf %q %q", dir, dir .. ".log"))
end)

T.test("atr_task: the preset at seed 42 with the original generator's stream", function()
  T.eq(paper.atr_task("pcfg_5_20"), { preset = "pcfg_5_20", seed = 42, rng = "numpy" })
end)

-- each suite's runs at the paper's scale (docs/reproduction.md, "The suites")
local paper_runs = { ar = 360, atr_easy = 300, atr_hard = 425, atr_split = 150, mamba_conv = 140, based_ablation = 125,
  ar_layers = 420, atr_1layer = 150, sibling = 450, delta_net = 25, atr_mamba_conv = 140 }

T.test("every suite: the paper's run count, seed 42 only in paper, a small smoke; AR quick has 2 seeds", function()
  local used = {}
  for _, f in ipairs(paper.figures) do for _, s in ipairs(f.sweeps) do used[s] = true end end
  for name, n in pairs(paper_runs) do
    T.truthy(used[name], name .. " feeds a figure")
    local file = paper.sweep_file(name)
    local p = sweep.load(file, "paper")
    T.eq(#p.runs, n, name .. " paper runs")
    for _, r in ipairs(p.runs) do T.eq(r.config.seed, 42, name) end
    local smoke = sweep.load(file, "smoke").runs
    T.truthy(#smoke >= 1 and #smoke <= 4, name .. " smoke runs")
    for _, r in ipairs(smoke) do T.truthy(r.steps <= 20, name .. " smoke steps") end
  end
  for name in pairs(used) do T.truthy(paper_runs[name], "the suite " .. name .. " is counted here") end
  local seeds, quick = {}, {}
  for _, r in ipairs(sweep.load(paper.sweep_file("ar"), "quick").runs) do seeds[r.config.seed], quick[r.id] = true, r end
  T.eq(seeds, { [42] = true, [43] = true }, "ar quick seeds")
  -- the learning-rate slice: the quick curves at four rates, seed 42; at lr 1e-3 the quick profile's own runs
  local slice, lrs = sweep.load(paper.sweep_file("ar"), "lr_slice").runs, {}
  T.eq(#slice, 48)
  for _, r in ipairs(slice) do
    lrs[r.config.lr] = true
    T.eq(r.config.seed, 42)
    T.eq(quick[r.id] ~= nil, r.config.lr == 1e-3, r.id)
  end
  T.eq(lrs, { [3e-4] = true, [1e-3] = true, [3e-3] = true, [1e-2] = true })
  -- Mamba at the paper's d = 256, one run at a rate of the slice
  local m256 = sweep.load(paper.sweep_file("ar"), "mamba_256").runs
  T.eq(#m256, 1)
  T.eq({ m256[1].config.model.arch, m256[1].config.model.d_model, m256[1].config.seed, lrs[m256[1].config.lr] },
    { "mamba", 256, 42, true })
  -- the conv ablation at Mamba's rate of the d = 256 run: d_conv 0-3 at both quick widths, seed 42
  local conv = sweep.load(paper.sweep_file("mamba_conv"), "best_lr").runs
  T.eq(#conv, 8)
  for _, r in ipairs(conv) do
    T.eq({ r.config.lr, r.config.seed, r.config.model.d_model <= 64 }, { m256[1].config.lr, 42, true }, r.id)
  end
  -- Attention without positions at the quick profile's widths, rate and seed: runs of its own
  local nope = sweep.load(paper.sweep_file("ar"), "nope").runs
  T.eq(#nope, 2)
  for _, r in ipairs(nope) do
    T.eq({ r.config.model.arch, r.config.model.pos_emb, r.config.lr, r.config.seed, quick[r.id] }, { "attention", false, 1e-3, 42 },
      r.id)
  end
end)

T.test("P.quick: widths 32 and 64, lr 1e-3, seed 42; a suite's axes added, its base and cell kept", function()
  T.eq(paper.quick(), { grid = { d_model = { 32, 64 }, lr = { 1e-3 }, seed = { 42 } } })
  local cell = function() end
  T.eq(paper.quick { grid = { seed = { 42, 43 }, pos_emb = { false } }, base = { epochs = 5 }, cell = cell },
    { grid = { d_model = { 32, 64 }, lr = { 1e-3 }, seed = { 42, 43 }, pos_emb = { false } }, base = { epochs = 5 },
      cell = cell })
end)

-- What a suite's figures compare (its runs differ in these, besides width, learning rate, seed and
-- positions): the quick profile keeps every value the paper profile has, at two widths.
local compared = { "task", "arch", "n_layers", "d_conv", "long_only" }

local function compared_cells(runs)
  local cells, widths = {}, {}
  for _, r in ipairs(runs) do
    local parts = {}
    for _, k in ipairs(compared) do
      local v = r.config[k] or r.config.model[k]
      parts[#parts + 1] = k .. "=" .. tostring(type(v) == "table" and v.preset or v)
    end
    cells[table.concat(parts, " ")] = true
    widths[r.config.model.d_model] = true
  end
  return cells, widths
end

T.test("every suite's quick profile keeps every architecture, task, depth and kernel, at widths 32 and 64", function()
  for name in pairs(paper_runs) do
    local file = paper.sweep_file(name)
    local want = compared_cells(sweep.load(file, "paper").runs)
    local have, widths = compared_cells(sweep.load(file, "quick").runs)
    T.eq(have, want, name)
    T.eq(widths, { [32] = true, [64] = true }, name)
  end
  -- a quick profile that drops an architecture or a kernel differs from its paper profile
  for name, axis in pairs { ar = { arch = { "attention", "mamba" } }, mamba_conv = { d_conv = { 0, 1, 2 } } } do
    local def = dofile(paper.sweep_file(name))
    for k, v in pairs(axis) do def.profiles.quick.grid[k] = v end
    T.falsy(T.equal(compared_cells(sweep.load(def, "quick").runs), compared_cells(sweep.load(def, "paper").runs)), name)
  end
end)

T.test("the split and sibling suites use the linear schedule; the split suite evaluates dev and test", function()
  for _, name in ipairs { "atr_split", "sibling" } do
    for _, r in ipairs(sweep.load(paper.sweep_file(name), "paper").runs) do T.eq(r.config.schedule, "linear", name) end
  end
  for _, r in ipairs(sweep.load(paper.sweep_file("ar"), "paper").runs) do T.eq(r.config.schedule, "cosine") end
  local r = sweep.load(paper.sweep_file("atr_split"), "paper").runs[1]
  T.eq(r.config.eval_splits, { "dev", "test" })
end)

T.test("the registry and the recipes agree on each figure's sweeps", function()
  for _, f in ipairs(paper.figures) do
    local recipe = dofile(paper.recipe_file(f.id))
    T.eq(recipe.id, f.id)
    T.eq(recipe.sweeps, f.sweeps, f.id)
    T.eq(type(recipe.draw), "function", f.id)
  end
end)

-- Under the sanitizers (ten times slower) only the AR figures are drawn: the recipes are Lua, and
-- the C they reach is the same for every suite; the Release run draws every figure.
local sanitized = os.getenv("MECHLAB_SANITIZE") == "ON"
local figures = paper.figures
if sanitized then
  figures = {}
  for _, fig in ipairs(paper.figures) do if fig.id:match("^fig3") then figures[#figures + 1] = fig end end
end

T.test("experiments/paper.lua --profile smoke draws every figure, its CSV and its index entry", function()
  local dir = os.tmpname()
  os.remove(dir)
  local t0 = mech.sys.time()
  local ids = {}
  if sanitized then for _, fig in ipairs(figures) do ids[#ids + 1] = fig.id end end
  local ok = os.execute(string.format("%q experiments/paper.lua --profile smoke --dir %q --jobs 2 %s > %q 2>&1", arg[-1],
    dir, table.concat(ids, " "), dir .. ".log"))
  local f = io.open(dir .. ".log", "rb")
  local log = f and f:read("a") or ""
  if f then f:close() end
  T.truthy(ok, "experiments/paper.lua failed:\n" .. log)
  print(string.format("  (smoke profile: %.0f s)", mech.sys.time() - t0))
  local index = io.open(dir .. "/figures/index.md", "rb")
  T.truthy(index, "index.md")
  local text = index:read("a")
  index:close()
  for _, fig in ipairs(figures) do
    for _, ext in ipairs { ".png", ".csv" } do
      T.truthy(mech.sys.exists(dir .. "/figures/" .. fig.id .. ext), fig.id .. ext)
    end
    T.truthy(text:find("## " .. fig.id, 1, true), "index lists " .. fig.id)
    T.truthy(text:find("(" .. fig.id .. ".png)", 1, true), "index shows " .. fig.id .. ".png")
  end
  T.truthy(not text:find("Not drawn", 1, true), "a figure was not drawn")
  -- a second call trains nothing and draws the same figures
  ok = os.execute(string.format("%q experiments/paper.lua --profile smoke --dir %q fig3a > %q 2>&1", arg[-1], dir,
    dir .. ".log"))
  f = io.open(dir .. ".log", "rb")
  log = f:read("a")
  f:close()
  T.truthy(ok, log)
  T.truthy(log:find("2 runs, 0 to train", 1, true), log)
  index = assert(io.open(dir .. "/figures/index.md", "rb"))
  text = index:read("a")
  index:close()
  T.truthy(text:find("## fig3a", 1, true) and text:find("## fig3b", 1, true), "index keeps the other figures")
  -- an unknown figure is refused, naming the figures
  ok = os.execute(string.format("%q experiments/paper.lua --profile smoke --dir %q fig99 > %q 2>&1", arg[-1], dir,
    dir .. ".log"))
  f = io.open(dir .. ".log", "rb")
  log = f:read("a")
  f:close()
  T.truthy(not ok)
  T.truthy(log:find("unknown figure 'fig99'", 1, true) and log:find("fig10", 1, true), log)
  -- experiments/mamba_next_key.lua on the AR sweep's Mamba run: a row per site and position
  ok = os.execute(string.format("%q experiments/mamba_next_key.lua %q out=%q n=8 > %q 2>&1", arg[-1], dir .. "/sweeps/ar",
    dir .. "/next_key", dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(ok and log:find("1 runs in", 1, true), log)
  local csv = mech.sys.read_file(dir .. "/next_key_runs.csv")
  T.truthy(csv and csv:find("^run,d_conv,d_model,lr,seed,accuracy,site,position,attrib,passes\n"), csv)
  T.truthy(csv:find(",4,16,0%.003,42,[^,]*,mixer%.conv,next_key,"), csv)
  T.truthy(mech.sys.exists(dir .. "/next_key.png"))
  -- best_lr=true: the runs at each width's best learning rate (the smoke profile has one)
  ok = os.execute(string.format("%q experiments/mamba_next_key.lua %q out=%q best_lr=true n=8 > %q 2>&1", arg[-1],
    dir .. "/sweeps/ar", dir .. "/next_key", dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(ok and log:find("conv 4, d = 16: the best lr 0.003", 1, true) and log:find("1 runs in", 1, true), log)
  -- a run the rows do not rank (its accuracy rows removed) is not among the best
  local rows_csv = mech.sys.read_file(dir .. "/sweeps/ar/results.csv")
  mech.sys.write_atomic(dir .. "/sweeps/ar/results.csv", (rows_csv:gsub("[^\n]*mamba[^\n]*,accuracy,[^\n]*\n", "")))
  ok = os.execute(string.format("%q experiments/mamba_next_key.lua %q out=%q best_lr=true n=8 > %q 2>&1", arg[-1],
    dir .. "/sweeps/ar", dir .. "/next_key", dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(not ok and log:find("no finished Mamba run", 1, true), log)
  mech.sys.write_atomic(dir .. "/sweeps/ar/results.csv", rows_csv)
  ok = os.execute(string.format("%q experiments/mamba_next_key.lua %q > %q 2>&1", arg[-1], dir .. "/figures", dir .. ".log"))
  T.truthy(not ok)
  for bad, says in pairs { ["n=0"] = "n= expects a count >= 1, got '0'", ["best_lr=yes"] = "best_lr= expects true or false",
      ["k=1"] = "unknown option 'k='" } do
    ok = os.execute(string.format("%q experiments/mamba_next_key.lua %s %q > %q 2>&1", arg[-1], bad, dir .. "/sweeps/ar",
      dir .. ".log"))
    T.truthy(not ok and mech.sys.read_file(dir .. ".log"):find(says, 1, true), bad)
  end
  -- experiments/attrib_se.lua on the AR sweep's Mamba run: the report step's Attrib again, to the
  -- bit of the sweep's own rows, each with its standard error
  ok = os.execute(string.format("%q experiments/attrib_se.lua %q %q runs=mamba > %q 2>&1", arg[-1], dir .. "/sweeps/ar",
    dir .. "/se.csv", dir .. ".log"))
  T.truthy(ok, mech.sys.read_file(dir .. ".log"))
  local own, n_se = {}, 0
  for _, r in ipairs(sweep.results(dir .. "/sweeps/ar/results.csv")) do
    if r.step_kind == "report" and r.split == "test" then own[r.run .. " " .. r.metric] = r.value end
  end
  local se_rows = sweep.results(dir .. "/se.csv")
  for _, r in ipairs(se_rows) do
    T.truthy(r.run:find("^mamba"), r.run)
    if r.metric:find("%.attrib$") then T.eq(r.value, own[r.run .. " " .. r.metric], r.metric)
    else n_se = n_se + 1; T.truthy(r.metric:find("%.block_input%.attrib_se$") and r.value >= 0, r.metric) end
  end
  T.truthy(n_se > 0 and n_se * 2 == #se_rows, #se_rows)
  -- again with the same file: the run's rows are kept, nothing is evaluated
  local first = mech.sys.read_file(dir .. "/se.csv")
  ok = os.execute(string.format("%q experiments/attrib_se.lua %q %q > %q 2>&1", arg[-1], dir .. "/sweeps/ar",
    dir .. "/se.csv", dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(ok and log:find("1 runs evaluated, 1 kept", 1, true), log)
  T.truthy(mech.sys.read_file(dir .. "/se.csv"):find(first:sub(#"sweep,run,split,step_kind,step,metric,value\n" + 1), 1, true))
  ok = os.execute(string.format("%q experiments/attrib_se.lua %q %q runs=nothing > %q 2>&1", arg[-1],
    dir .. "/sweeps/ar", dir .. "/none.csv", dir .. ".log"))
  T.truthy(not ok and mech.sys.read_file(dir .. ".log"):find("no finished run", 1, true))
  -- experiments/attention_mass.lua on the AR sweep's Attention run: a row per layer and position
  ok = os.execute(string.format("%q experiments/attention_mass.lua %q out=%q n=16 > %q 2>&1", arg[-1],
    dir .. "/sweeps/ar", dir .. "/mass", dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(ok and log:find("1 runs; ", 1, true) and log:find("layer 1: value ", 1, true), log)
  csv = mech.sys.read_file(dir .. "/mass.csv")
  T.truthy(csv:find("^run,arch,d_model,pos_emb,seed,layer,position,mass\n"), csv)
  T.truthy(csv:find(",attention,16,true,42,1,value,") and csv:find(",attention,16,true,42,0,query,"), csv)
  for _, bad in ipairs { dir .. "/figures", "n=x " .. dir .. "/sweeps/ar" } do
    ok = os.execute(string.format("%q experiments/attention_mass.lua %s > %q 2>&1", arg[-1], bad, dir .. ".log"))
    T.truthy(not ok, bad)
  end
  T.truthy(mech.sys.read_file(dir .. ".log"):find("n= expects a count, got 'x'", 1, true))
  -- a figure with one of its sweeps not done yet is drawn from the others, its entry says so; one
  -- with none is not drawn (under the sanitizers mamba_conv was never run)
  os.rename(dir .. "/sweeps/mamba_conv/results.csv", dir .. "/mamba_conv.csv")
  ok = os.execute(string.format("%q experiments/paper.lua --profile smoke --dir %q --draw-only fig6a > %q 2>&1", arg[-1],
    dir, dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(ok and log:find("partial, no results yet for mamba_conv", 1, true), log)
  text = mech.sys.read_file(dir .. "/figures/fig6a.md")
  T.truthy(text:find("(fig6a.png)", 1, true) and text:find("- partial: no results yet for mamba_conv", 1, true), text)
  -- the entry records the command as given: running it again draws, it does not train
  T.truthy(text:find("- command: `mechlab experiments/paper.lua --profile smoke --dir " .. dir .. " --draw-only fig6a`",
    1, true), text)
  os.rename(dir .. "/sweeps/ar/results.csv", dir .. "/ar.csv")
  ok = os.execute(string.format("%q experiments/paper.lua --profile smoke --dir %q --draw-only fig6a > %q 2>&1", arg[-1],
    dir, dir .. ".log"))
  log = mech.sys.read_file(dir .. ".log")
  T.truthy(not ok and log:find("fig6a: not drawn: no results yet for ar, mamba_conv", 1, true), log)
  os.execute(string.format("rm -rf %q %q", dir, dir .. ".log"))
end)

T.done()
