-- The sweep engine's costs, and the projected cost of the paper's whole grid and quick profiles.
--   build/mechlab bench/bench_sweep.lua [part ...]     parts: workers overhead aggregate eval grid quick
--   build/mechlab bench/bench_sweep.lua FILE:PROFILE ...  one profile's projection (as `quick`)
--   build/mechlab bench/bench_sweep.lua issue42           issue 42's background blocks, in order
--   build/mechlab bench/bench_sweep.lua grid bf16         the grid in fp32 and in bf16 (model option
--                                                          `precision`), each step timed in both in turn
-- Run it on an otherwise idle machine; it prints numbers and asserts nothing.
local sweep = require "mech.sweep"
local train = require "mech.train"
local json = require "mech.json"
local paper = require "mech.paper"

local parts, profiles = {}, {}
for _, a in ipairs(arg or {}) do
  if a:find(":", 1, true) then profiles[#profiles + 1] = a else parts[a] = true end
end
local all = next(parts) == nil and #profiles == 0

-- issue 42's background blocks (docs/reproduction.md, "Background compute (issue 42)"), in the
-- order the driver runs them
local issue42 = {
  { "quick-scale", "experiments/paper/ar_layers.lua:based_best_lr" },
  { "quick-scale", "experiments/paper/ar.lua:pe_pairs" },
  { "quick-scale", "experiments/paper/atr_easy.lua:pe_pairs" },
  { "quick-scale", "experiments/paper/atr_hard.lua:quick32" },
  { "quick-scale", "experiments/paper/atr_hard.lua:nope_pair" },
  { "d = 128/256", "experiments/paper/ar.lua:best_lr_128" },
  { "d = 128/256", "experiments/paper/mamba_conv.lua:best_lr_wide" },
  { "d = 128/256", "experiments/paper/ar.lua:best_lr_256" },
}
if parts.issue42 then
  for _, b in ipairs(issue42) do profiles[#profiles + 1] = b[2] end
end

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)
local function now() return mech.sys.time() end

-- CPU milliseconds per training step (one thread, batch 32) of a model config (arch, d_model,
-- n_layers, ...) on a task (a preset name or {preset, seed, rng}), measured once per distinct
-- (task, model): 4 warm-up steps, then `timed` steps.
local step_cache, task_data = {}, {}
local function step_ms(task, model, timed)
  local key = json.encode { task, model }
  if step_cache[key] then return step_cache[key] end
  local task_key = json.encode(task)
  if not task_data[task_key] then
    local t = train.make_task { task = task, seed = 42 }
    task_data[task_key] = { task = t, ds = t:dataset(64 * 32, { seed = 1, split = "train" }) }
  end
  local t = task_data[task_key]
  local config = { vocab = t.task:vocab_size() }
  for k, v in pairs(model) do config[k] = v end
  local m = mech.model(config)
  local opt = mech.adamw(m)
  local function step(i)
    local tokens, targets = t.ds:batch(32 * (i % 64), 32)
    m:train_step(opt, tokens, targets, 1e-3)
  end
  for i = 0, 3 do step(i) end
  local t0 = os.clock() -- CPU time: one thread's step costs the same on a machine busy with sweeps
  for i = 0, timed - 1 do step(i) end
  step_cache[key] = (os.clock() - t0) / timed * 1000
  return step_cache[key]
end

local function tiny(name, grid, base)
  local b = { task = "ar_32", model = { n_layers = 2 }, train_docs = 3200, eval_docs = 64, batch_size = 32,
    eval_every = 100, seed = 1 }
  for k, v in pairs(base or {}) do b[k] = v end
  return { name = name, base = b, grid = grid }
end

if all or parts.workers then
  -- run throughput with 1 and 2 workers: 4 runs of 400 steps at D = 64
  local d = tiny("workers", { arch = { "attention", "mamba" }, d_model = { 64 }, lr = { 1e-3, 3e-3 } }, { steps = 400 })
  local t = {}
  for _, jobs in ipairs { 1, 2 } do
    local t0 = now()
    sweep.run(d, { dir = tmp .. "/workers" .. jobs, jobs = jobs, aggregate = false })
    t[jobs] = now() - t0
  end
  print(string.format("workers: 4 runs of 400 steps (D = 64): 1 worker %.1f s, 2 workers %.1f s: %.2fx the runs per second",
    t[1], t[2], t[1] / t[2]))
end

if all or parts.overhead then
  -- engine overhead: runs with no training step (claim, spawn, data, manifest, aggregation)
  local d = tiny("overhead", { seed = { 1, 2, 3, 4, 5, 6, 7, 8 } }, { steps = 0, train_docs = 32, eval_docs = 8,
    model = { n_layers = 1, arch = "attention", d_model = 16 } })
  local t0 = now()
  sweep.run(d, { dir = tmp .. "/overhead", jobs = 1 })
  local wall = now() - t0
  local t1 = now()
  train.run { task = "ar_32", model = { n_layers = 1, arch = "attention", d_model = 16 }, train_docs = 32,
    eval_docs = 8, batch_size = 32, steps = 0, quiet = true }
  local inside = now() - t1
  print(string.format("overhead: %.3f s per run end to end with 0 steps (of which %.3f s is train.run itself)",
    wall / 8, inside))
end

if all or parts.aggregate then
  -- aggregate over 2,500 synthetic run directories shaped like AR runs: 252 evaluations,
  -- training loss every 50 steps, one interchange evaluation of 2 layers x 6 components x 5 positions
  local dir = tmp .. "/agg"
  mech.sys.mkdir(dir .. "/runs")
  local runs, n = {}, 2500
  local metric_lines = { "step,split,metric,value" }
  for s = 0, 50000, 200 do
    for _, m in ipairs { "accuracy", "loss", "prob" } do metric_lines[#metric_lines + 1] = s .. ",test," .. m .. ",0.5" end
  end
  for _, m in ipairs { "accuracy", "loss", "prob" } do metric_lines[#metric_lines + 1] = "50016,test," .. m .. ",0.5" end
  for s = 50, 50000, 50 do metric_lines[#metric_lines + 1] = s .. ",train,loss,1.5" end
  for _, layer in ipairs { 0, 1 } do
    for _, comp in ipairs { "block_input", "attention_input", "attention_output", "mlp_input", "mlp_output", "block_output" } do
      for _, pos in ipairs { "query_item_orig", "target_item_orig", "query_item", "target_item", "divider" } do
        for _, m in ipairs { "prob_diff", "restored_prob", "attrib", "restored_logit", "logit_diff", "kl_div" } do
          metric_lines[#metric_lines + 1] = string.format("50000,test,%d.KEY.query_item_orig.%s.%s.%s,0.25", layer, pos, comp, m)
        end
        metric_lines[#metric_lines + 1] = string.format("50000,test,original.KEY.query_item_orig.%s.%s.restored_prob,0.9", pos, comp)
        metric_lines[#metric_lines + 1] = string.format("50000,test,corrupted.KEY.query_item_orig.%s.%s.restored_prob,0.1", pos, comp)
      end
    end
  end
  local metrics_text = table.concat(metric_lines, "\n") .. "\n"
  local manifest = json.encode { status = "done", step = 50016, steps = 50016, model = { arch = "mamba", d_model = 64 } }
  for i = 1, n do
    local id = string.format("run%04d", i)
    runs[i] = { id = id, axes = { lr = i }, config = { model = { arch = "mamba", d_model = 64 }, lr = i, seed = 42 },
      steps = 50016, report_step = 50000 }
    mech.sys.mkdir(dir .. "/runs/" .. id)
    mech.sys.write_atomic(dir .. "/runs/" .. id .. "/metrics.csv", metrics_text)
    mech.sys.write_atomic(dir .. "/runs/" .. id .. "/manifest.json", manifest)
  end
  mech.sys.write_atomic(dir .. "/sweep.json", json.encode { name = "agg", axes = { "lr" }, runs = runs })
  -- the first pass extracts every run's rows (a sweep's workers do this as each run ends, in
  -- parallel); the second is what `sweep aggregate` costs after a sweep
  local t0 = now()
  sweep.aggregate(dir)
  local first = now() - t0
  t0 = now()
  local rows = sweep.aggregate(dir)
  print(string.format("aggregate: %d run directories (%d metric rows each) in %.2f s: %d result rows " ..
    "(%.2f s with no run's rows extracted yet: %.1f ms a run, paid by its worker)", n, #metric_lines - 1,
    now() - t0, rows, first, 1000 * first / n))
  -- the scan a `sweep run` progress line does (at most every 10 s): every run's manifest and lock
  t0 = now()
  local st = sweep.status(dir)
  print(string.format("status: %d run directories in %.2f s (%d done)", n, now() - t0, st.counts.done))
end

if all or parts.eval then
  -- evaluation inside a run at D = 64 with the paper's cadence: 320 documents every 200 steps and
  -- the interchange evaluation once, at the reported step
  local ic = require "mech.interchange"
  local task = mech.task.preset("ar_32", 42)
  for _, arch in ipairs { "attention", "mamba" } do
    local base = { task = task, model = { arch = arch, d_model = 64, n_layers = 2, pos_emb = arch == "attention" },
      train_docs = 6400, eval_docs = 320, batch_size = 32, steps = 400, lr = 1e-3, quiet = true, threads = 1 }
    base.eval_every = 100000
    local r = train.run(base)
    local t_step = r.wall / 400
    local ds = task:dataset(320, { seed = 42, split = "test" })
    local t0 = now()
    train.evaluate(r.model, ds, 64)
    local t_eval = now() - t0
    t0 = now()
    ic.evaluate(r.model, ds, { label_types = { "query_item_orig" } })
    local t_ic = now() - t0
    local T = 50016
    local eval_total = (T // 200 + 1) * t_eval + t_ic
    print(string.format("eval %s: step %.1f ms, evaluation %.0f ms, interchange %.1f s: %.1f %% of a 50,016-step run",
      arch, 1000 * t_step, 1000 * t_eval, t_ic, 100 * eval_total / (T * t_step + eval_total)))
  end
end

if all or parts.grid then
  -- the paper's grid (spec §5.5) in core-hours, from step times measured here (one thread) on
  -- each suite's own task
  local function grid_ms(arch, d, layers, preset, precision)
    local task = preset == "ar_32" and preset or paper.atr_task(preset) -- the sweeps' own PCFG documents
    local model = { arch = arch, d_model = d, n_layers = layers }
    if precision == "bf16" then model.precision = "bf16" end -- fp32 stays the key it always was
    return step_ms(task, model, d >= 128 and 8 or 20)
  end
  -- with `bf16`, every (task, model) is timed in fp32 and then in bf16, side by side
  local precisions = parts.bf16 and { "fp32", "bf16" } or { "fp32" }
  local archs = { "attention", "hyena", "base_conv", "based", "h3", "mamba" }
  local widths = { 16, 32, 64, 128, 256 }
  local no_h3 = { "attention", "hyena", "base_conv", "based", "mamba" }
  -- exactly the paper's grid, suite by suite as docs/reproduction.md's "The suites" counts it
  -- (2,685 runs): {sweep, suite, task, archs, layers, learning rates x variants, epochs (x 3,126 steps)}.
  -- PE and NoPE runs cost the same here (a learned position table is one add).
  local suites = {
    { "ar", "AR PE + NoPE + extra LRs", "ar_32", archs, 2, 12, 16 },
    { "atr_easy", "ATR easy PE + NoPE", "pcfg_5_20", archs, 2, 10, 32 },
    { "atr_hard", "ATR 8192 (PE)", "pcfg_easy_8192", archs, 2, 5, 32 },
    { "atr_hard", "ATR medium PE", "pcfg_10_20", archs, 2, 5, 32 },
    { "atr_hard", "ATR medium NoPE (no H3)", "pcfg_10_20", no_h3, 2, 5, 32 },
    { "atr_split", "ATR split", "pcfg_tts", archs, 2, 5, 32 },
    { "mamba_conv", "Mamba conv ablation (4 kernels)", "ar_32", { "mamba" }, 2, 28, 16 },
    { "based_ablation", "Based long-conv ablation", "ar_32", { "based", "base_conv" }, 2, 5, 16 },
    { "based_ablation", "Based kernel ablation (3 kernels)", "ar_32", { "based" }, 2, 15, 16 },
    { "ar_layers", "AR 1-layer", "ar_32", archs, 1, 7, 16 },
    { "ar_layers", "AR 3-layer", "ar_32", archs, 3, 7, 16 },
    { "atr_1layer", "ATR 1-layer", "pcfg_5_20", archs, 1, 5, 32 },
    { "sibling", "Sibling 1/2/3-layer (as 2-layer)", "sibling", archs, 2, 15, 32 },
    { "delta_net", "v3 AR DeltaNet", "ar_32", { "delta_net" }, 2, 5, 16 },
    { "atr_mamba_conv", "v3 ATR Mamba conv ablation", "pcfg_5_20", { "mamba" }, 2, 28, 32 },
  }
  local total_h, total_runs = {}, 0
  for _, s in ipairs(suites) do
    local sweep_name, name, preset, list, layers, lrs, epochs = table.unpack(s)
    local seconds, runs = {}, 0
    for _, arch in ipairs(list) do
      for _, d in ipairs(widths) do
        for _, p in ipairs(precisions) do
          seconds[p] = (seconds[p] or 0) + grid_ms(arch, d, layers, preset, p) / 1000 * 3126 * epochs * lrs
        end
        runs = runs + lrs
      end
    end
    total_runs = total_runs + runs
    local cols = {}
    for _, p in ipairs(precisions) do
      total_h[p] = (total_h[p] or 0) + seconds[p] / 3600
      cols[#cols + 1] = string.format("%7.0f core-hours%s", seconds[p] / 3600, #precisions > 1 and " " .. p or "")
    end
    print(string.format("grid: %-15s %-34s %5d runs %s", sweep_name, name, runs, table.concat(cols, "  ")))
  end
  for _, p in ipairs(precisions) do
    print(string.format("grid: the paper's grid, %d runs%s: %.0f core-hours on one core each (the paper: under 10,000 GPU-hours)",
      total_runs, #precisions > 1 and " in " .. p or "", total_h[p]))
  end
  local line = {}
  for _, a in ipairs(archs) do
    line[#line + 1] = string.format("%s %.1f/%.1f", a, grid_ms(a, 64, 2, "ar_32"), grid_ms(a, 256, 2, "ar_32"))
  end
  print("grid: ms per AR step at D = 64 / 256: " .. table.concat(line, ", "))
  line = {}
  for _, a in ipairs(archs) do
    line[#line + 1] = string.format("%s %.1f/%.1f", a, grid_ms(a, 32, 2, "pcfg_5_20"), grid_ms(a, 64, 2, "pcfg_5_20"))
  end
  print("grid: ms per ATR easy step at D = 32 / 64: " .. table.concat(line, ", "))
end

if all or parts.quick then
  -- every paper sweep's quick profile, from the step times of its own (task, model) configs
  -- measured here (one thread, training steps only: evaluation adds a few percent). A sweep's
  -- wall on 2 cores is its core-hours / 1.9 (2 workers give 1.9x one) or its longest run, if
  -- longer; a figure's group is the sweeps it needs, run one after another.
  local files = io.popen("ls experiments/paper/*.lua")
  local wall = {}
  for file in files:lines() do
    local s = sweep.load(file, "quick")
    local steps, seconds, longest = 0, 0, 0
    for _, r in ipairs(s.runs) do
      local ms = step_ms(r.config.task, r.config.model, r.config.model.d_model >= 64 and 10 or 20)
      steps = steps + r.steps
      seconds = seconds + ms / 1000 * r.steps
      longest = math.max(longest, ms / 1000 * r.steps)
    end
    wall[s.name] = math.max(seconds / 1.9, longest) / 3600
    print(string.format("quick: %-16s %3d runs %9d steps %5.2f core-hours %5.2f h on 2 cores", s.name, #s.runs, steps,
      seconds / 3600, wall[s.name]))
  end
  files:close()
  local groups, seen = {}, {}
  for _, f in ipairs(paper.figures) do
    local key = table.concat(f.sweeps, " + ")
    if not seen[key] then
      seen[key] = { figures = {}, sweeps = f.sweeps }
      groups[#groups + 1] = key
    end
    table.insert(seen[key].figures, f.id)
  end
  -- the main suites feed most figures and train once: a group's wall is also given without them
  local main = { ar = true, atr_easy = true }
  for _, key in ipairs(groups) do
    local g, h, added = seen[key], 0, 0
    for _, name in ipairs(g.sweeps) do
      h = h + wall[name]
      if not main[name] then added = added + wall[name] end
    end
    print(string.format("quick: %-30s %5.2f h on 2 cores, %5.2f h without ar and atr_easy (%s)", key, h, added,
      table.concat(g.figures, " ")))
  end
end

if #profiles > 0 then
  -- named profiles: runs, steps, core-hours (training steps, one thread each) and the wall on 2
  -- workers (core-hours / 1.9, or the longest run if longer), each run's own hours too
  local sum_h, sum_wall = 0, 0
  for _, fp in ipairs(profiles) do
    local file, profile = fp:match("^(.-):(.+)$")
    local s = sweep.load(file, profile)
    local steps, seconds, longest, each = 0, 0, 0, {}
    for _, r in ipairs(s.runs) do
      local ms = step_ms(r.config.task, r.config.model, r.config.model.d_model >= 128 and 6 or 10)
      steps = steps + r.steps
      seconds = seconds + ms / 1000 * r.steps
      longest = math.max(longest, ms / 1000 * r.steps)
      each[#each + 1] = string.format("%s %.2f", r.id:match("^(.-)%-s%d+%-") or r.id, ms / 1000 * r.steps / 3600)
    end
    local wall = math.max(seconds / 1.9, longest) / 3600
    sum_h, sum_wall = sum_h + seconds / 3600, sum_wall + wall
    print(string.format("profile: %-48s %3d runs %9d steps %6.2f core-hours %6.2f h on 2 cores", fp, #s.runs, steps,
      seconds / 3600, wall))
    print("  core-hours per run: " .. table.concat(each, ", "))
  end
  print(string.format("profile: all %d above: %.2f core-hours, %.2f h on 2 cores one after another", #profiles, sum_h,
    sum_wall))
end

os.execute("rm -rf '" .. tmp .. "'")
