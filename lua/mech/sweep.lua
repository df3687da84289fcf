--- Sweeps: a grid of train.run configs as one Lua file, its runs on every core of this machine
--- (or on a SLURM cluster, lua/mech/sweep_slurm.lua), resumable, with results in one tidy table.
--- docs/sweeps.md is the user's guide; the directory layout:
---
---   DIR/sweep.json                 the definition's expansion: every run's id, axes and config
---   DIR/runs/<id>/                 a train.run directory (manifest.json, metrics.csv, checkpoints,
---                                  lock) plus log.txt and checkpoint-report.safetensors
---   DIR/results.csv, curves.csv, summary.txt      written by aggregate
local json = require "mech.json"
local train = require "mech.train"
local ic = require "mech.interchange"

local sweep = {}

local function fail(fn, msg, level) error("sweep." .. fn .. ": " .. msg, level or 3) end

local function closest(name, set)
  local best, bd = nil, math.huge
  for k in pairs(set) do
    local d = train.distance(tostring(name), k)
    if d < bd or (d == bd and k < best) then best, bd = k, d end
  end
  return best
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = copy(x) end
  return t
end

-- b's keys over a's, tables merged key by key (lists replaced whole).
local function deep_merge(a, b)
  local t = copy(a)
  for k, v in pairs(b) do
    if type(v) == "table" and type(t[k]) == "table" and #v == 0 and next(v) ~= nil then t[k] = deep_merge(t[k], v)
    else t[k] = copy(v) end
  end
  return t
end

local read_file = mech.sys.read_file -- nil when the file is missing

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

------------------------------------------------------------------------------------------------
-- Definitions

-- The options of mech.model (axes of these names go into config.model).
local model_keys
local function get_model_keys()
  if not model_keys then
    model_keys = {}
    for k in pairs(mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 8 }:config()) do
      model_keys[k] = true
    end
    model_keys.seed = nil -- `seed` is train.run's (the model's seed follows it)
  end
  return model_keys
end

local canonical_axes = { "task", "arch", "n_layers", "d_model", "d_conv", "pos_emb", "lr", "seed" }
local canonical_rank = {}
for i, a in ipairs(canonical_axes) do canonical_rank[a] = i end

local function axis_order(grid)
  local names = {}
  for k in pairs(grid) do names[#names + 1] = k end
  table.sort(names, function(a, b)
    local ra, rb = canonical_rank[a] or math.huge, canonical_rank[b] or math.huge
    if ra ~= rb then return ra < rb end
    return a < b
  end)
  return names
end

local def_keys = { name = 1, description = 1, base = 1, grid = 1, cell = 1, evaluators = 1, report_step = 1, select = 1,
  profiles = 1 }

-- The definition with a profile applied, checked.
local function resolve(def, profile, fn)
  if type(def) ~= "table" then fail(fn, "expected a sweep definition (a table), got " .. type(def), 4) end
  for k in pairs(def) do
    if not def_keys[k] then fail(fn, string.format("unknown key '%s' in the sweep definition (did you mean '%s'?)",
      tostring(k), closest(k, def_keys)), 4) end
  end
  if type(def.name) ~= "string" or not def.name:match("^[a-z0-9_]+$") then
    fail(fn, "the definition's 'name' expected a string of [a-z0-9_], got " .. tostring(def.name), 4)
  end
  local d = { name = def.name, description = def.description, base = copy(def.base or {}), grid = copy(def.grid or {}),
    cell = def.cell, evaluators = copy(def.evaluators or {}), report_step = def.report_step, select = copy(def.select) }
  local profiles = def.profiles or {}
  if profile == nil and profiles.paper then profile = "paper" end
  if profile ~= nil then
    local p = profiles[profile]
    if not p then
      local names = {}
      for k in pairs(profiles) do names[#names + 1] = k end
      table.sort(names)
      fail(fn, string.format("sweep '%s' has no profile '%s' (it has: %s)", def.name, tostring(profile),
        #names > 0 and table.concat(names, ", ") or "none"), 4)
    end
    for k, v in pairs(p.grid or {}) do d.grid[k] = copy(v) end
    d.base = deep_merge(d.base, p.base or {})
    for _, k in ipairs { "evaluators", "report_step", "select", "cell" } do
      if p[k] ~= nil then d[k] = copy(p[k]) end
    end
  end
  d.profile = profile
  if next(d.grid) == nil then fail(fn, "the grid of sweep '" .. def.name .. "' is empty (no axes)", 4) end
  local known = train.config_keys()
  known.out, known.resume, known.lock, known.overwrite = nil, nil, nil, nil
  for k in pairs(get_model_keys()) do known[k] = true end
  for k, values in pairs(d.grid) do
    if not known[k] then
      fail(fn, string.format("unknown axis '%s' (did you mean '%s'?)", tostring(k), closest(k, known)), 4)
    end
    if type(values) ~= "table" or #values == 0 then
      fail(fn, string.format("axis '%s' expected a non-empty list of values, got %s", k,
        type(values) == "table" and "an empty list" or type(values)), 4)
    end
  end
  for k in pairs(d.base) do
    if not known[k] and k ~= "model" then
      fail(fn, string.format("unknown base option '%s' (did you mean '%s'?)", tostring(k), closest(k, known)), 4)
    end
  end
  for i, ev in ipairs(d.evaluators) do
    if ev.kind ~= "interchange" then
      fail(fn, string.format("evaluator %d: kind expected \"interchange\", got %s", i, tostring(ev.kind)), 4)
    end
  end
  return d
end

-- 64-bit FNV-1a of a string, as 16 hex digits (Lua integers wrap, as the hash wants).
local function fnv1a(s)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #s do
    h = h ~ s:byte(i)
    h = h * 1099511628211
  end
  return string.format("%016x", h)
end
sweep.hash = fnv1a

local function number_text(v)
  if math.type(v) == "integer" then return tostring(v) end
  local t = string.format("%.6g", v):gsub("e%-0*", "e-"):gsub("e%+0*", "e")
  return t
end

local function task_text(v)
  if type(v) == "table" then
    local t = tostring(v.preset)
    if v.seed then t = t .. "-t" .. v.seed end
    if v.rng then t = t .. "-" .. v.rng end
    return t
  end
  return tostring(v)
end

local slug_of = {
  task = task_text,
  arch = tostring,
  n_layers = function(v) return "L" .. v end,
  d_model = function(v) return "d" .. v end,
  d_conv = function(v) return "k" .. v end,
  pos_emb = function(v) return v and "pe" or "nope" end,
  lr = function(v) return "lr" .. number_text(v) end,
  seed = function(v) return "s" .. v end,
}

local function slug(axes, order)
  local parts = {}
  for _, a in ipairs(order) do
    local v = axes[a]
    if v ~= nil then
      local f = slug_of[a]
      local text = f and f(v) or (a .. "=" .. (type(v) == "number" and number_text(v) or task_text(v)))
      parts[#parts + 1] = text
    end
  end
  return (table.concat(parts, "-"):gsub("[^%w%.%-_=]", "_"))
end

local function total_steps(c)
  if c.steps then return c.steps end
  local d = train.default
  return ((c.train_docs or d("train_docs")) // (c.batch_size or d("batch_size"))) * (c.epochs or d("epochs"))
end

local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end

-- The reported step: the largest step <= T that every evaluation cadence visits.
local function report_step(d, c)
  local T = total_steps(c)
  if type(d.report_step) == "number" then return math.min(d.report_step, T) end
  if type(d.report_step) == "function" then return d.report_step(T) end
  local l = c.eval_every or train.default("eval_every")
  for _, ev in ipairs(d.evaluators) do
    if ev.every then l = l // gcd(l, ev.every) * ev.every end
  end
  return T // l * l
end

-- The runs of a resolved definition: deterministic, in the canonical axis order.
local function expand(d, fn)
  local order = axis_order(d.grid)
  local cells = { {} }
  for _, a in ipairs(order) do
    local next_cells = {}
    for _, c in ipairs(cells) do
      for _, v in ipairs(d.grid[a]) do
        local n = copy(c)
        n[a] = copy(v)
        next_cells[#next_cells + 1] = n
      end
    end
    cells = next_cells
  end
  local mk = get_model_keys()
  local runs, by_hash = {}, {}
  for _, cell in ipairs(cells) do
    local keep = cell
    if d.cell then
      local r = d.cell(cell)
      if r == false then keep = nil elseif type(r) == "table" then keep = r end
    end
    if keep then
      local config = copy(d.base)
      config.model = copy(config.model or {})
      for k, v in pairs(keep) do
        if mk[k] then config.model[k] = copy(v) else config[k] = copy(v) end
      end
      config.threads = 1
      config.out, config.resume, config.quiet, config.progress = nil, nil, nil, nil
      local text = json.encode(config)
      local hash = fnv1a(text)
      local id = slug(keep, order) .. "-" .. hash:sub(1, 8)
      if by_hash[hash] then
        fail(fn, string.format("runs %s and %s have the same config (a cell override made them collide)",
          by_hash[hash], id), 4)
      end
      by_hash[hash] = id
      runs[#runs + 1] = { id = id, axes = keep, config = config, report_step = report_step(d, config),
        steps = total_steps(config) }
    end
  end
  if #runs == 0 then fail(fn, "sweep '" .. d.name .. "' has no runs (every cell was excluded)", 4) end
  return runs, order
end

local function load_definition(file_or_table, fn)
  if type(file_or_table) == "table" then return file_or_table, nil end
  if type(file_or_table) ~= "string" then
    fail(fn, "argument 1 expected a sweep file path or a definition table, got " .. type(file_or_table), 4)
  end
  local path, missing = mech.find(file_or_table) -- here, else in mechlab's home (an installation)
  if not path then fail(fn, "no sweep file: " .. missing, 4) end
  local chunk, err = loadfile(path)
  if not chunk then fail(fn, err, 4) end
  file_or_table = path
  local ok, def = pcall(chunk)
  if not ok then fail(fn, file_or_table .. ": " .. tostring(def), 4) end
  return def, file_or_table
end

--- The expanded runs of a sweep file or definition, without touching disk:
--- {name, profile, runs = {{id, axes, config, report_step, steps}, ...}, axes = {names in order}}.
function sweep.load(file_or_table, profile)
  local def = load_definition(file_or_table, "load")
  local d = resolve(def, profile, "load")
  local runs, order = expand(d, "load")
  return { name = d.name, profile = d.profile, description = d.description, runs = runs, axes = order,
    evaluators = d.evaluators, select = d.select }
end

------------------------------------------------------------------------------------------------
-- The sweep directory

local function read_sweep(dir, fn)
  local text = read_file(dir .. "/sweep.json")
  if not text then fail(fn, "'" .. dir .. "' is not a sweep directory (no sweep.json)", 4) end
  return json.decode(text, dir .. "/sweep.json")
end

-- Writes DIR/sweep.json for a loaded sweep, or checks that the one there is the same sweep.
local function prepare(s, dir, file, force)
  mech.sys.mkdir(dir .. "/runs")
  local record = { name = s.name, profile = s.profile, file = file, axes = s.axes, evaluators = s.evaluators,
    select = s.select, runs = s.runs }
  local hash = fnv1a(json.encode { s.name, s.profile or false, s.runs, s.evaluators })
  record.definition_hash = hash
  local old = read_file(dir .. "/sweep.json")
  if old then
    local o = json.decode(old, dir .. "/sweep.json")
    if o.definition_hash == hash then return o end
    if not force then
      fail("run", string.format("%s holds sweep '%s' (profile %s) of another definition; use another --dir, or "
        .. "--force to adopt it (finished runs whose config is unchanged are kept)", dir, tostring(o.name),
        tostring(o.profile)), 4)
    end
  end
  record.created = mech.sys.utc()
  mech.sys.write_atomic(dir .. "/sweep.json", json.encode(record, " ") .. "\n")
  return record
end

local function run_dir(dir, id) return dir .. "/runs/" .. id end

local function read_manifest(dir, id)
  local text = read_file(run_dir(dir, id) .. "/manifest.json")
  if not text then return nil end
  local ok, m = pcall(json.decode, text)
  return ok and m or nil
end

-- A run's state from its directory alone: pending, running (locked), done, failed, interrupted
-- (checkpointed and stopped, or its process died without a word).
local function run_state(dir, id)
  local m = read_manifest(dir, id)
  if not m then
    if mech.sys.exists(run_dir(dir, id) .. "/lock") then
      local lk = mech.sys.lock(run_dir(dir, id) .. "/lock")
      if not lk then return "running" end
      lk:release()
    end
    return "pending"
  end
  if m.status == "done" or m.status == "failed" then return m.status, m end
  local lk = mech.sys.lock(run_dir(dir, id) .. "/lock")
  if not lk then return "running", m end
  lk:release()
  return "interrupted", m
end

------------------------------------------------------------------------------------------------
-- One run

-- train.run evaluators for a run: the report checkpoint and the sweep's evaluators.
local function make_evaluators(evaluators, run, rdir)
  local R = run.report_step
  local list = {
    { every = math.max(R, 1), fn = function(step, model)
      if step == R then model:save(rdir .. "/checkpoint-report.safetensors", { meta = { ["train.step"] = tostring(R) } }) end
    end },
  }
  for _, ev in ipairs(evaluators or {}) do
    local opts = {}
    for k, v in pairs(ev) do if k ~= "kind" and k ~= "at" and k ~= "every" then opts[k] = v end end
    local inner = ic.evaluator(opts)
    if ev.every then
      list[#list + 1] = { every = ev.every, fn = inner.fn }
    else -- at = "report"
      list[#list + 1] = { every = math.max(R, 1), fn = function(step, model, ctx)
        if step == R then inner.fn(step, model, ctx) end
      end }
    end
  end
  return list
end

local exit_codes = { SIGINT = 130, SIGTERM = 143 }
local run_rows -- (dir, sweep, run): the run's rows of results.csv and curves.csv (aggregate, below)

--- Trains one run of the sweep in DIR (the unit every executor runs). Returns an exit status:
--- 0 done, 1 failed (recorded in its manifest), 75 claimed by another live process, 130/143
--- interrupted by SIGINT/SIGTERM after saving a checkpoint.
function sweep.exec(dir, id)
  if type(dir) ~= "string" then fail("exec", "argument 1 expected a sweep directory, got " .. type(dir)) end
  if type(id) ~= "string" or id == "" then
    fail("exec", "argument 2 expected a run id, got " .. (id == "" and "an empty string" or type(id)))
  end
  local s = read_sweep(dir, "exec")
  local run
  for _, r in ipairs(s.runs) do if r.id == id then run = r end end
  if not run then
    local ids = {}
    for _, r in ipairs(s.runs) do ids[r.id] = true end
    fail("exec", string.format("no run '%s' in %s (did you mean '%s'?)", tostring(id), dir, closest(id, ids)))
  end
  local rdir = run_dir(dir, id)
  mech.sys.mkdir(rdir)
  local lock, holder = mech.sys.lock(rdir .. "/lock")
  if not lock then
    io.stderr:write(string.format("sweep exec: run %s is being trained by %s\n", id, holder))
    return 75
  end
  local prior = read_manifest(dir, id)
  if prior and prior.status == "done" then lock:release(); return 0 end
  local config = copy(run.config)
  config.out, config.resume, config.lock, config.progress = rdir, true, lock, false
  config.evaluators = make_evaluators(s.evaluators, run, rdir)
  print(string.format("sweep exec: run %s of sweep %s (%s)", id, s.name, mech.sys.utc()))
  if prior and (prior.step or 0) > 0 then
    print(string.format("sweep exec: resuming run %s from its checkpoint at step %d", id, prior.step))
  end
  local ok, res = pcall(train.run, config)
  lock:release()
  if not ok then
    io.stderr:write("sweep exec: run " .. id .. " failed: " .. tostring(res) .. "\n")
    -- failures before train.run's own manifest (a bad config, say) still leave a record
    local m = read_manifest(dir, id)
    if not m or m.status ~= "failed" then
      mech.sys.write_atomic(rdir .. "/manifest.json", json.encode({ status = "failed", error = tostring(res),
        config = run.config, host = mech.sys.hostname(), end_time = mech.sys.utc() }, "  ") .. "\n")
    end
    pcall(run_rows, dir, s, run) -- a cache for aggregate; it rebuilds what is missing
    return 1
  end
  if res.status == "interrupted" then
    print(string.format("sweep exec: run %s interrupted by %s at step %d of %d; its checkpoint is saved and the next "
      .. "`sweep run` resumes it (%s)", id, res.signal, res.step, res.steps, mech.sys.utc()))
    return exit_codes[res.signal] or 130
  end
  pcall(run_rows, dir, s, run)
  return 0
end

------------------------------------------------------------------------------------------------
-- Status

--- The state of every run of the sweep in DIR, from the run directories alone:
--- {name, profile, counts = {done, running, failed, interrupted, pending}, runs = {{id, state, manifest}}}.
function sweep.status(dir)
  local s = read_sweep(dir, "status")
  local counts = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }
  local runs = {}
  for _, r in ipairs(s.runs) do
    local state, m = run_state(dir, r.id)
    counts[state] = counts[state] + 1
    runs[#runs + 1] = { id = r.id, state = state, manifest = m, steps = r.steps }
  end
  return { name = s.name, profile = s.profile, counts = counts, runs = runs, total = #s.runs }
end

local function counts_line(c, total)
  return string.format("%d/%d done, %d running, %d failed, %d interrupted, %d pending", c.done, total, c.running,
    c.failed, c.interrupted, c.pending)
end

------------------------------------------------------------------------------------------------
-- Executors

local function fmt_time(s)
  if not s or s ~= s or s == math.huge then return "--:--" end
  s = math.floor(s + 0.5)
  return s >= 3600 and string.format("%d:%02d:%02d", s // 3600, s // 60 % 60, s % 60) or
      string.format("%02d:%02d", s // 60, s % 60)
end

-- The local executor: `jobs` worker processes (`mechlab sweep exec DIR ID`, one thread each).
local function run_local(dir, todo, opts)
  local exe = mech.sys.executable()
  local jobs = opts.jobs or mech.sys.cores()
  local queue, running, n_running, mine = {}, {}, 0, {} -- mine: the ids of this process's running workers
  for i = #todo, 1, -1 do queue[#queue + 1] = todo[i] end -- a stack, popped in sweep order
  local st = sweep.status(dir)
  -- steps: a run's length; from: the step it stood at when this process started (a resuming
  -- run's checkpoint; 0 for a run trained anew)
  local steps_of, from, todo_ids = {}, {}, {}
  for _, r in ipairs(todo) do todo_ids[r.id] = true end
  local function step_now(r)
    return r.state == "done" and r.steps or (r.manifest and r.manifest.step or 0)
  end
  for _, r in ipairs(st.runs) do
    steps_of[r.id] = r.steps
    from[r.id] = todo_ids[r.id] and (r.manifest and r.manifest.status ~= "done" and r.manifest.step or 0) or step_now(r)
  end
  local t0, steps_done = mech.sys.time(), 0
  local tty = mech.sys.isatty(1)
  local last_print, last_scan, failed_ids, signal, stopping = 0, t0, {}, nil, false

  -- The progress line reads the directory, not this process's bookkeeping, since several `sweep
  -- run`s may share one: counts, and steps/s and ETA over every run's steps since this process
  -- started (manifests are updated at each checkpoint). A scan reads every manifest, so it is
  -- done at most every 10 s, or when a run of this process ends.
  local function show(force)
    local now = mech.sys.time()
    if not force and now - last_print < (tty and 1 or 30) then return end
    last_print = now
    if force or now - last_scan >= 10 then st, last_scan = sweep.status(dir), now end
    local counts, trained, remaining = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }, 0, 0
    for _, r in ipairs(st.runs) do
      local at, state = step_now(r), r.state
      if mine[r.id] and state ~= "done" and state ~= "failed" then state = "running" end -- before its worker locks it
      counts[state] = counts[state] + 1
      trained = trained + math.max(0, at - from[r.id])
      if state ~= "done" and state ~= "failed" then remaining = remaining + r.steps - at end
    end
    st.counts = counts
    local rate = trained / math.max(now - t0, 1e-9)
    local line = string.format("sweep %s: %s  %s steps/s  ETA %s", st.name, counts_line(counts, st.total),
      trained > 0 and string.format("%.1f", rate) or "--", trained > 0 and fmt_time(remaining / rate) or "--:--")
    if tty then io.write("\r\27[K" .. line); io.flush() else print(line) end
  end

  mech.sys.catch_signals()
  while (#queue > 0 and not signal) or n_running > 0 do
    signal = signal or mech.sys.interrupted()
    if signal and not stopping then -- the workers checkpoint and stop (a terminal's Ctrl-C reached them too)
      stopping = true
      for pid in pairs(running) do mech.sys.kill(pid, signal) end
    end
    while not signal and n_running < jobs and #queue > 0 do
      local r = table.remove(queue)
      local rdir = run_dir(dir, r.id)
      mech.sys.mkdir(rdir)
      local pid = mech.sys.spawn({ exe, "sweep", "exec", dir, r.id }, rdir .. "/log.txt")
      running[pid], mine[r.id] = r, true
      n_running = n_running + 1
    end
    local pid, code, sig = mech.sys.wait(-1, false)
    if pid and running[pid] then
      local r = running[pid]
      running[pid], mine[r.id] = nil, nil
      n_running = n_running - 1
      if code == 0 then
        steps_done = steps_done + steps_of[r.id] - from[r.id]
      elseif code ~= 75 and code ~= 130 and code ~= 143 then -- 75: claimed by another process; else interrupted
        local m = read_manifest(dir, r.id)
        failed_ids[#failed_ids + 1] = { id = r.id, error = m and m.error or
          (sig and ("killed by " .. tostring(sig)) or ("exit status " .. tostring(code))) }
      end
      show(tty)
    elseif not pid then
      mech.sys.sleep(0.05)
    end
    show(false)
  end
  mech.sys.release_signals()
  show(true)
  if tty then io.write("\n") end
  for _, f in ipairs(failed_ids) do print("failed: " .. f.id .. ": " .. tostring(f.error)) end
  return { counts = st.counts, failed = failed_ids, signal = signal, wall = mech.sys.time() - t0, steps = steps_done }
end

local function print_commands(dir, todo)
  local exe = mech.sys.executable()
  for _, r in ipairs(todo) do
    print(string.format("%s sweep exec %s %s", shell_quote(exe), shell_quote(dir), shell_quote(r.id)))
  end
  return { printed = #todo }
end

--- Runs a sweep: writes DIR/sweep.json, then trains every run not yet done with an executor.
--- opts: profile, dir (default results/<name>-<profile>), executor ("local", "slurm", "print"),
--- jobs (local workers; default the number of cores), force, retry (failed runs again),
--- aggregate (default true for the local executor).
function sweep.run(file_or_table, opts)
  opts = opts or {}
  local known = { profile = 1, dir = 1, executor = 1, jobs = 1, force = 1, retry = 1, aggregate = 1, max_parallel = 1,
    steps_per_s = 1, partition = 1, account = 1, time_margin = 1 }
  for k in pairs(opts) do
    if not known[k] then fail("run", string.format("unknown option '%s' (did you mean '%s'?)", tostring(k),
      closest(k, known))) end
  end
  local def, file = load_definition(file_or_table, "run")
  local d = resolve(def, opts.profile, "run")
  local runs, order = expand(d, "run")
  local s = { name = d.name, profile = d.profile, runs = runs, axes = order, evaluators = d.evaluators, select = d.select }
  local dir = opts.dir or ("results/" .. d.name .. "-" .. (d.profile or "default"))
  local executor = opts.executor or "local"
  if executor ~= "local" and executor ~= "slurm" and executor ~= "print" then
    fail("run", "executor expected \"local\", \"slurm\" or \"print\", got " .. tostring(executor))
  end
  if opts.jobs ~= nil and (math.type(opts.jobs) ~= "integer" or opts.jobs < 1) then
    fail("run", "jobs expected a positive integer, got " .. tostring(opts.jobs))
  end
  prepare(s, dir, file, opts.force)
  local st = sweep.status(dir)
  local todo = {}
  for _, r in ipairs(st.runs) do
    if r.state == "pending" or r.state == "interrupted" or (r.state == "failed" and opts.retry) then
      todo[#todo + 1] = r
    end
  end
  if executor == "print" then return print_commands(dir, todo) end
  if executor == "slurm" then
    local ok, slurm = pcall(require, "mech.sweep_slurm")
    if not ok then fail("run", "the slurm executor is not available: " .. tostring(slurm)) end
    local ids = {}
    for _, r in ipairs(todo) do ids[#ids + 1] = r.id end
    return slurm.submit(d.name, dir, ids, opts)
  end
  print(string.format("sweep %s (profile %s): %d runs, %d to train, in %s", d.name, d.profile or "default", #runs,
    #todo, dir))
  local res = run_local(dir, todo, opts)
  if opts.aggregate ~= false and not res.signal then sweep.aggregate(dir) end
  res.dir = dir
  return res
end

------------------------------------------------------------------------------------------------
-- Aggregation

local fixed_columns = { "task", "arch", "n_layers", "d_model", "d_conv", "pos_emb", "lr", "seed", "steps" }

local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "boolean" then return tostring(v) end
  if type(v) == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    if v ~= v then return "nan" end
    return (json.encode(v))
  end
  if type(v) == "table" then v = task_text(v) end
  v = tostring(v)
  if v:find('[,"\n]') then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

-- A run's values of the fixed columns and its other axes.
local function run_columns(s, r, m)
  local c, model = r.config, (m and m.model) or {}
  local v = {
    task = r.axes.task or c.task, arch = c.model.arch or model.arch, n_layers = c.model.n_layers or model.n_layers,
    d_model = c.model.d_model or model.d_model, d_conv = c.model.d_conv or model.d_conv,
    pos_emb = c.model.pos_emb, lr = c.lr, seed = c.seed, steps = r.steps,
  }
  if v.pos_emb == nil then v.pos_emb = model.pos_emb end
  if v.arch ~= "mamba" and v.d_conv == nil then v.d_conv = nil end
  return v
end

-- metrics.csv as text; values stay text (written once, in the shortest exact form).
local function read_metrics(path) return read_file(path) or "" end

-- A file written in pieces and renamed into place when whole: aggregate's outputs reach
-- hundreds of MB at the paper's scale, too much to build as one string first.
local function stream(path)
  local tmp = path .. ".tmp." .. mech.sys.getpid()
  local f = assert(io.open(tmp, "wb"))
  f:setvbuf("full", 1 << 20)
  return {
    f = f,
    close = function()
      local ok, err = f:close()
      if not ok then os.remove(tmp); error("sweep.aggregate: cannot write '" .. path .. "': " .. tostring(err), 0) end
      local okr, errr = os.rename(tmp, path)
      if not okr then os.remove(tmp); error("sweep.aggregate: " .. tostring(errr), 0) end
    end,
  }
end

-- The metrics of curves.csv: the training loss and the evaluation's accuracy, loss and prob.
local curve_metric = { accuracy = true, loss = true, prob = true }

-- One run's rows, without the run's own columns: its curve lines (as in metrics.csv) and its
-- result lines `split,metric,step_kind,step,value` — per split the reported, final and best
-- (highest accuracy) steps, each with its summary and interchange metrics.
local function extract_rows(text, report_step)
  local curves, by_split = {}, {} -- by_split: split -> step -> metric -> value (text)
  for line, step, split, metric, value in text:gmatch("((%d+),([^,\n]*),([^,\n]*),([^\n]*)\n)") do
    if curve_metric[metric] and (split ~= "train" or metric == "loss") then curves[#curves + 1] = line end
    if split ~= "train" then
      step = tonumber(step)
      local st = by_split[split]
      if not st then st = {}; by_split[split] = st end
      local vals = st[step]
      if not vals then vals = {}; st[step] = vals end
      vals[metric] = value
    end
  end
  local out, report_acc = {}, nil
  local splits = {}
  for split in pairs(by_split) do splits[#splits + 1] = split end
  table.sort(splits)
  for _, split in ipairs(splits) do
    local steps = by_split[split]
    local final, best, best_acc = nil, nil, -math.huge
    local list = {}
    for step in pairs(steps) do list[#list + 1] = step end
    table.sort(list)
    for _, step in ipairs(list) do
      local acc = tonumber(steps[step].accuracy)
      if acc then
        final = step
        if acc > best_acc then best, best_acc = step, acc end
      end
    end
    local kinds = {}
    if steps[report_step] and steps[report_step].accuracy then kinds[#kinds + 1] = { "report", report_step } end
    if final then kinds[#kinds + 1] = { "final", final } end
    if best then kinds[#kinds + 1] = { "best", best } end
    for _, k in ipairs(kinds) do
      local kind, step = k[1], k[2]
      local vals = steps[step]
      if kind == "report" and split == "test" then report_acc = tonumber(vals.accuracy) end
      local head, tail = csv_field(split) .. ",", "," .. kind .. "," .. step .. ","
      local function row(name, value) out[#out + 1] = head .. name .. tail .. value .. "\n" end
      for _, name in ipairs { "accuracy", "loss", "prob" } do
        if vals[name] then row(name, vals[name]) end
      end
      -- interchange metrics where they were measured (the reported step, or every N steps)
      local labels = {}
      for name in pairs(vals) do
        local label = name:match("^(%d+%..+)%.prob_diff$")
        if label then labels[#labels + 1] = label end
      end
      table.sort(labels)
      for _, label in ipairs(labels) do
        local rest = label:match("^%d+%.(.*)$")
        local o, c = tonumber(vals["original." .. rest .. ".restored_prob"]), tonumber(vals["corrupted." .. rest .. ".restored_prob"])
        if vals[label .. ".attrib"] then row(label .. ".attrib", vals[label .. ".attrib"]) end
        if o and c then row(label .. ".attrib_den", csv_field(o - c)) end
        row(label .. ".prob_diff", vals[label .. ".prob_diff"])
        if vals[label .. ".restored_prob"] then row(label .. ".restored_prob", vals[label .. ".restored_prob"]) end
      end
    end
  end
  return table.concat(curves), table.concat(out), #out, report_acc
end

-- text (whole lines) with prefix before every line.
local function prefix_lines(prefix, text)
  local out, pos = {}, 1
  while pos <= #text do
    local nl = text:find("\n", pos, true)
    out[#out + 1] = text:sub(pos, nl)
    pos = nl + 1
  end
  if #out == 0 then return "" end
  return prefix .. table.concat(out, prefix)
end

-- runs/<id>/rows.cache holds a finished run's rows of curves.csv and results.csv as aggregate
-- writes them, so that aggregating a sweep is mostly concatenation: the worker writes it when
-- its run ends (in parallel, on the cluster's nodes too), and aggregate uses it while
-- metrics.csv keeps the size it was made from and the run's columns are unchanged.
-- Layout: "mechlab-rows 2 <metrics bytes> <report step> <test accuracy there or -> <curve
-- bytes> <result rows>", the curve prefix, the result prefix (a line each), the curve rows, the
-- result rows.
local cache_magic = "mechlab-rows 2"
local cache_head = "^mechlab%-rows 2 (%d+) (%-?%d+) (%S+) (%d+) (%d+)\n([^\n]*)\n([^\n]*)\n()"

local function file_size(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n
end

-- The axes that are columns beyond the fixed ones, sorted.
local function extra_axes(s)
  local fixed, extra = {}, {}
  for _, a in ipairs(fixed_columns) do fixed[a] = true end
  for _, a in ipairs(s.axes) do if not fixed[a] then extra[#extra + 1] = a end end
  table.sort(extra)
  return extra
end

-- A run's rows of curves.csv and results.csv, its state, manifest and test accuracy at the
-- reported step. Rows of finished runs come from (or go to) runs/<id>/rows.cache.
function run_rows(dir, s, r)
  local state, m = run_state(dir, r.id)
  local cols, extra = run_columns(s, r, m), s.extra or extra_axes(s)
  local prefix = { csv_field(s.name), csv_field(r.id), state }
  for _, a in ipairs(fixed_columns) do prefix[#prefix + 1] = csv_field(cols[a]) end
  for _, a in ipairs(extra) do prefix[#prefix + 1] = csv_field(r.axes[a]) end
  local cprefix = { csv_field(s.name), csv_field(r.id), csv_field(cols.arch), csv_field(cols.d_model),
    csv_field(cols.lr), csv_field(cols.seed) }
  for _, a in ipairs(extra) do cprefix[#cprefix + 1] = csv_field(r.axes[a]) end
  prefix, cprefix = table.concat(prefix, ",") .. ",", table.concat(cprefix, ",") .. ","
  local finished = state == "done" or state == "failed"

  local rdir = run_dir(dir, r.id)
  local size = file_size(rdir .. "/metrics.csv")
  local cached = finished and read_file(rdir .. "/rows.cache")
  if cached then
    local bytes, step, acc, ncurve, nresult, cp, rp, body = cached:match(cache_head)
    if bytes and tonumber(bytes) == size and tonumber(step) == r.report_step and cp == cprefix and rp == prefix then
      ncurve = tonumber(ncurve)
      return { curves = cached:sub(body, body + ncurve - 1), results = cached:sub(body + ncurve),
        n = tonumber(nresult), acc = tonumber(acc), state = state, manifest = m }
    end
  end
  local text = read_metrics(rdir .. "/metrics.csv")
  if text ~= "" and text:sub(-1) ~= "\n" then text = text .. "\n" end
  local curves, results, n, acc = extract_rows(text, r.report_step)
  curves, results = prefix_lines(cprefix, curves), prefix_lines(prefix, results)
  if finished then
    local head = string.format("%s %d %d %s %d %d\n%s\n%s\n", cache_magic, size, r.report_step,
      acc and string.format("%.17g", acc) or "-", #curves, n, cprefix, prefix)
    mech.sys.write_atomic(rdir .. "/rows.cache", head .. curves .. results)
  end
  return { curves = curves, results = results, n = n, acc = acc, state = state, manifest = m }
end

--- Writes DIR/results.csv (tidy long form), DIR/curves.csv and DIR/summary.txt from the run
--- directories; returns the number of rows of results.csv.
function sweep.aggregate(dir)
  local s = read_sweep(dir, "aggregate")
  s.extra = extra_axes(s)
  local header = { "sweep", "run", "status" }
  for _, a in ipairs(fixed_columns) do header[#header + 1] = a end
  for _, a in ipairs(s.extra) do header[#header + 1] = a end
  local curve_header = { "sweep", "run", "arch", "d_model", "lr", "seed" }
  for _, a in ipairs(s.extra) do curve_header[#curve_header + 1] = a end
  for _, h in ipairs { "step", "split", "metric", "value" } do curve_header[#curve_header + 1] = h end
  for _, h in ipairs { "split", "metric", "step_kind", "step", "value" } do header[#header + 1] = h end

  local results, curves, summary, n = stream(dir .. "/results.csv"), stream(dir .. "/curves.csv"), {}, 0
  results.f:write(table.concat(header, ","), "\n")
  curves.f:write(table.concat(curve_header, ","), "\n")
  for _, r in ipairs(s.runs) do
    local rows = run_rows(dir, s, r)
    curves.f:write(rows.curves)
    results.f:write(rows.results)
    n = n + rows.n
    summary[#summary + 1] = { id = r.id, state = rows.state, acc = rows.acc, m = rows.manifest }
  end
  results.close()
  curves.close()

  local counts = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }
  local lines = { string.format("sweep %s, profile %s: %d runs", s.name, s.profile or "default", #s.runs) }
  local width = 3
  for _, e in ipairs(summary) do
    counts[e.state] = counts[e.state] + 1
    width = math.max(width, #e.id)
  end
  lines[#lines + 1] = counts_line(counts, #s.runs)
  lines[#lines + 1] = ""
  lines[#lines + 1] = string.format("%-" .. width .. "s  %-11s  %13s  %8s", "run", "status", "test acc@rep", "wall")
  for _, e in ipairs(summary) do
    lines[#lines + 1] = string.format("%-" .. width .. "s  %-11s  %13s  %8s", e.id, e.state,
      e.acc and string.format("%.4f", e.acc) or "-", e.m and e.m.wall_s and fmt_time(e.m.wall_s) or "-")
  end
  mech.sys.write_atomic(dir .. "/summary.txt", table.concat(lines, "\n") .. "\n")
  return n
end

------------------------------------------------------------------------------------------------
-- Reading results (for figure recipes)

local function parse_csv_line(line)
  local fields, pos = {}, 1
  while true do
    if line:sub(pos, pos) == '"' then
      local buf, i = {}, pos + 1
      while true do
        local j = line:find('"', i, true)
        if not j then error("sweep.results: unterminated quote") end
        buf[#buf + 1] = line:sub(i, j - 1)
        if line:sub(j + 1, j + 1) == '"' then buf[#buf + 1] = '"'; i = j + 2 else pos = j + 1; break end
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local j = line:find(",", pos, true) or #line + 1
      fields[#fields + 1] = line:sub(pos, j - 1)
      pos = j
    end
    if line:sub(pos, pos) ~= "," then break end
    pos = pos + 1
  end
  return fields
end

local function convert(v)
  if v == "" then return nil end
  if v == "true" then return true elseif v == "false" then return false end
  return math.tointeger(tonumber(v)) or tonumber(v) or v
end

--- The rows of DIR/results.csv (or a results.csv path) as tables keyed by column, numbers and
--- booleans converted, empty fields nil.
function sweep.results(path)
  if type(path) ~= "string" then fail("results", "argument 1 expected a sweep directory or a results.csv path") end
  if not path:match("%.csv$") then path = path .. "/results.csv" end
  local f = io.open(path, "rb")
  if not f then fail("results", "cannot read '" .. path .. "' (run `mechlab sweep aggregate DIR` first)") end
  local header, rows = nil, {}
  for line in f:lines() do
    local fields = parse_csv_line(line)
    if not header then header = fields
    else
      local row = {}
      for i, h in ipairs(header) do row[h] = convert(fields[i] or "") end
      rows[#rows + 1] = row
    end
  end
  f:close()
  return rows, header
end

local function key_of(row, ignore)
  local parts = {}
  local names = {}
  for k in pairs(row) do
    if not ignore[k] then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(row[k]) end
  return table.concat(parts, "|")
end

--- The paper's selection (the best learning rate per architecture and width; docs/reproduction.md,
--- "Model selection and the filter"):
--- rows of one metric/split/step_kind are grouped by every axis but `over` and seed; within a
--- group, the `over` values with the highest mean over seeds win. Returns a list of
--- {runs = {ids}, value = mean, over = {axis = value}, row = a representative row}, and a set of
--- the selected run ids. rule: {metric = "accuracy", split = "test", step_kind = "report", over = {"lr"}}.
function sweep.select(rows, rule)
  rule = rule or {}
  local metric, split, kind = rule.metric or "accuracy", rule.split or "test", rule.step_kind or "report"
  local over = rule.over or { "lr" }
  local ignore = { run = true, value = true, step = true, status = true, seed = true }
  for _, a in ipairs(over) do ignore[a] = true end
  local groups, order = {}, {}
  for _, row in ipairs(rows) do
    if row.metric == metric and row.split == split and row.step_kind == kind then
      local g = key_of(row, ignore)
      if not groups[g] then groups[g] = {}; order[#order + 1] = g end
      local sub = {}
      for _, a in ipairs(over) do sub[#sub + 1] = tostring(row[a]) end
      sub = table.concat(sub, "|")
      local e = groups[g][sub]
      if not e then
        e = { runs = {}, sum = 0, n = 0, over = {}, row = row }
        for _, a in ipairs(over) do e.over[a] = row[a] end
        groups[g][sub] = e
      end
      e.runs[#e.runs + 1] = row.run
      e.sum, e.n = e.sum + row.value, e.n + 1
    end
  end
  local chosen, selected = {}, {}
  for _, g in ipairs(order) do
    local best
    local subs = {}
    for k in pairs(groups[g]) do subs[#subs + 1] = k end
    table.sort(subs)
    for _, k in ipairs(subs) do
      local e = groups[g][k]
      e.value = e.sum / e.n
      if not best or e.value > best.value then best = e end
    end
    chosen[#chosen + 1] = { runs = best.runs, value = best.value, over = best.over, row = best.row }
    for _, id in ipairs(best.runs) do selected[id] = true end
  end
  return chosen, selected
end

--- The runs passing the paper's filter for one interchange label (docs/reproduction.md, "Model
--- selection and the filter"): mean original restored probability − mean corrupted restored
--- probability > threshold (0.01) at `step_kind`.
function sweep.filter(rows, label, threshold, step_kind)
  threshold, step_kind = threshold or 0.01, step_kind or "report"
  local pass = {}
  for _, row in ipairs(rows) do
    if row.metric == label .. ".attrib_den" and row.step_kind == step_kind and row.value > threshold then
      pass[row.run] = true
    end
  end
  return pass
end

------------------------------------------------------------------------------------------------
-- Command line: mechlab sweep run|status|aggregate|exec ...

local usage = [[
usage: mechlab sweep run FILE [--profile P] [--dir DIR] [--executor local|slurm|print] [--jobs N] [--force] [--retry]
       mechlab sweep status DIR
       mechlab sweep aggregate DIR
       mechlab sweep exec DIR RUN_ID
       mechlab sweep exec DIR --list FILE --index N      (the N-th run id of FILE, 0-based)
       mechlab sweep list FILE [--profile P]             (the runs, without training)]]

local function parse_flags(args, first, spec)
  local pos, flags = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    local name = a:match("^%-%-([%w_-]+)$")
    if name then
      name = name:gsub("-", "_")
      if spec[name] == nil then
        error(string.format("mechlab sweep: unknown option --%s (did you mean --%s?)\n%s", name,
          closest(name, spec):gsub("_", "-"), usage), 0)
      end
      if spec[name] == "flag" then flags[name] = true
      else
        i = i + 1
        if args[i] == nil then error("mechlab sweep: --" .. name .. " expects a value", 0) end
        flags[name] = spec[name] == "int" and (math.tointeger(tonumber(args[i])) or
          error("mechlab sweep: --" .. name .. " expects an integer, got " .. args[i], 0)) or args[i]
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return pos, flags
end

local function nth_line(path, n)
  local f = io.open(path, "rb")
  if not f then error("mechlab sweep exec: cannot read " .. path, 0) end
  local i = 0
  for line in f:lines() do
    if i == n then f:close(); return line end
    i = i + 1
  end
  f:close()
  error(string.format("mechlab sweep exec: %s has %d lines; no index %d", path, i, n), 0)
end

function sweep.main(...)
  local args = { ... }
  local cmd = args[1]
  if cmd == "run" then
    local pos, f = parse_flags(args, 2, { profile = "string", dir = "string", executor = "string", jobs = "int",
      force = "flag", retry = "flag", max_parallel = "int", partition = "string", account = "string" })
    if #pos ~= 1 then error("mechlab sweep run: expected one sweep file\n" .. usage, 0) end
    local res = sweep.run(pos[1], f)
    if res.signal then os.exit(exit_codes[res.signal] or 130) end
    if res.counts and res.counts.failed > 0 then os.exit(1) end
    if res.array_job then print(string.format("submitted array job %s and aggregation job %s", res.array_job,
      tostring(res.aggregate_job))) end
  elseif cmd == "status" then
    if #args ~= 2 then error("mechlab sweep status: expected a sweep directory\n" .. usage, 0) end
    local st = sweep.status(args[2])
    print(string.format("sweep %s (profile %s): %s", st.name, st.profile or "default", counts_line(st.counts, st.total)))
    for _, r in ipairs(st.runs) do
      if r.state ~= "done" and r.state ~= "pending" then
        local m = r.manifest
        print(string.format("  %-11s %s%s", r.state, r.id, m and m.step and string.format("  (step %d/%d)", m.step,
          r.steps) or "") .. (r.state == "failed" and m and m.error and ("  " .. m.error) or ""))
      end
    end
  elseif cmd == "aggregate" then
    if #args ~= 2 then error("mechlab sweep aggregate: expected a sweep directory\n" .. usage, 0) end
    local n = sweep.aggregate(args[2])
    print(string.format("%s: %d result rows; results.csv, curves.csv, summary.txt", args[2], n))
    io.write(read_file(args[2] .. "/summary.txt") or "")
  elseif cmd == "exec" then
    local pos, f = parse_flags(args, 2, { list = "string", index = "int" })
    local id = pos[2]
    if f.list then id = nth_line(f.list, f.index or error("mechlab sweep exec: --list needs --index", 0)) end
    if #pos < 1 or not id then error("mechlab sweep exec: expected DIR RUN_ID or DIR --list FILE --index N\n" .. usage, 0) end
    os.exit(sweep.exec(pos[1], id))
  elseif cmd == "list" then
    local pos, f = parse_flags(args, 2, { profile = "string" })
    if #pos ~= 1 then error("mechlab sweep list: expected one sweep file\n" .. usage, 0) end
    local s = sweep.load(pos[1], f.profile)
    for _, r in ipairs(s.runs) do print(r.id, r.steps .. " steps") end
    print(string.format("%d runs", #s.runs))
  else
    error((cmd and ("mechlab sweep: unknown command '" .. cmd .. "'\n") or "") .. usage, 0)
  end
end

return sweep
