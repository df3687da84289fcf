--- Training loop (docs/training.md, "The training loop"): one call with a config table.
--
--   local train = require "mech.train"
--   local run = train.run{
--     model = {arch = "attention", d_model = 64, n_layers = 2, pos_emb = true},
--     task = "ar_32",                 -- a preset name, a task record (task:spec()) or a task object
--     train_docs = 100032, eval_docs = 320, batch_size = 32, epochs = 16,  -- or steps = N
--     lr = 1e-3, schedule = "cosine", warmup = 0.1, weight_decay = 0,
--     eval_every = 200, seed = 42, out = "runs/ar_attention",
--   }
--   print(run.final.accuracy)
--
-- `report_docs = N` evaluates the reported step (`report_step`, default the last) on N documents
-- of each split instead of eval_docs (a sweep sets report_step to its run's; issue 42).
-- `precision = "bf16"` trains the model with bf16 products (its model option; a sweep axis can set
-- it here), as `model = {precision = "bf16"}` does.
--
-- The loop visits s = 0 .. T: at each s it evaluates when s % eval_every == 0 (and at T), then
-- performs update s with the batch of documents batch_size·(s mod steps_per_epoch) onward (fixed
-- order, no shuffling). With `out`, the run directory gets manifest.json, metrics.csv (step,
-- split, metric, value) and checkpoint.safetensors. `resume = path` continues a checkpoint
-- exactly: k steps, save, resume, T−k more gives the bits of T steps straight.
local json = require "mech.json"
local util = require "mech.util"
local mech = require "mech"

local train = {}

local defaults = {
  model = {}, task = "ar_32", train_docs = 100032, eval_docs = 320, batch_size = 32, eval_batch = 64,
  epochs = 1, lr = 1e-3, schedule = "cosine", warmup = 0.1, weight_decay = 0, beta1 = 0.9, beta2 = 0.999,
  eps = 1e-8, eval_every = 200, log_every = 50, seed = 42, quiet = false,
}
-- keys without a default (nil unless given)
local optional = { "steps", "task_seed", "eval_splits", "out", "checkpoint_every", "resume", "threads", "progress",
  "evaluators", "stop_at", "overwrite", "lock", "on_nonfinite", "report_docs", "report_step", "precision" }

--- The default of a config key (nil for keys without one).
function train.default(key) return defaults[key] end

--- The keys a train.run config may hold (a set).
function train.config_keys()
  local keys = {}
  for k in pairs(defaults) do keys[k] = true end
  for _, k in ipairs(optional) do keys[k] = true end
  return keys
end

-- the model's common options (src/nn/options.c), for a suggestion when one is given outside model=
local model_keys = { "arch", "d_model", "n_layers", "n_heads", "vocab", "max_pos", "pos_emb", "state_mixer",
  "tie_embeddings" }

local function check_config(cfg)
  if type(cfg) ~= "table" then error("train.run: argument 1 expected a config table, got " .. type(cfg), 3) end
  local known = train.config_keys()
  for k in pairs(cfg) do
    if not known[k] then
      -- a model's option given at the top level (num_layers, hidden_size) belongs under model=
      local candidates = {}
      for name in pairs(known) do candidates[name] = true end
      for _, name in ipairs(model_keys) do candidates[name] = true end
      local best = util.closest(tostring(k), candidates)
      if not known[best] then
        error(string.format("train.run: unknown config key '%s' (did you mean model = { %s = ... }?)", tostring(k), best), 3)
      end
      error(string.format("train.run: unknown config key '%s' (did you mean '%s'?)", tostring(k), best), 3)
    end
  end
  local c = {}
  for k, v in pairs(defaults) do c[k] = v end
  for k, v in pairs(cfg) do c[k] = v end
  for _, k in ipairs { "train_docs", "eval_docs", "batch_size", "eval_batch", "eval_every", "log_every" } do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      error(string.format("train.run: '%s' expected a positive integer, got %s", k, tostring(c[k])), 3)
    end
  end
  if type(c.lr) ~= "number" or c.lr < 0 then error("train.run: 'lr' expected a number >= 0, got " .. tostring(c.lr), 3) end
  if c.steps == nil and (math.type(c.epochs) ~= "integer" or c.epochs < 1) then
    error("train.run: 'epochs' expected a positive integer, got " .. tostring(c.epochs), 3)
  end
  if c.steps ~= nil and (math.type(c.steps) ~= "integer" or c.steps < 0) then
    error("train.run: 'steps' expected an integer >= 0, got " .. tostring(c.steps), 3)
  end
  for _, k in ipairs { "report_docs", "report_step" } do
    if c[k] ~= nil and (math.type(c[k]) ~= "integer" or c[k] < (k == "report_docs" and 1 or 0)) then
      error(string.format("train.run: '%s' expected %s, got %s", k,
        k == "report_docs" and "a positive integer" or "an integer >= 0", tostring(c[k])), 3)
    end
  end
  if c.report_step ~= nil and c.report_docs == nil then
    error("train.run: 'report_step' needs 'report_docs' (the documents that step is evaluated on)", 3)
  end
  if c.on_nonfinite ~= nil and c.on_nonfinite ~= "stop" and c.on_nonfinite ~= "record" then
    error("train.run: 'on_nonfinite' expected \"stop\" or \"record\", got " .. tostring(c.on_nonfinite), 3)
  end
  if c.resume ~= nil and c.resume ~= true and c.resume ~= false and type(c.resume) ~= "string" then
    error("train.run: 'resume' expected true or a checkpoint path, got " .. type(c.resume), 3)
  end
  if (c.resume == true or c.overwrite or c.lock) and not c.out then
    error("train.run: 'resume = true', 'overwrite' and 'lock' need 'out' (the run directory)", 3)
  end
  if c.resume and c.overwrite then error("train.run: 'resume' and 'overwrite' exclude each other", 3) end
  -- the model's precision may be set for the run (a sweep axis): it is the model's option
  if c.precision ~= nil and c.precision ~= "fp32" and c.precision ~= "bf16" then
    error("train.run: 'precision' expected \"fp32\" or \"bf16\", got " .. tostring(c.precision), 3)
  end
  local mp = type(c.model) == "table" and c.model.precision
  if c.precision ~= nil and mp ~= nil and mp ~= c.precision then
    error(string.format("train.run: 'precision' (%s) and model.precision (%s) differ", tostring(c.precision), tostring(mp)), 3)
  end
  return c
end

local function make_task(c)
  if type(c.task) == "string" then return mech.task.preset(c.task, c.task_seed or c.seed) end
  -- a task record as data (task:spec(): {kind, name, seed, options}), e.g. from a sweep file
  if type(c.task) == "table" and c.task.kind then return mech.task.from_spec(c.task) end
  -- a task written in Lua, named by its module (and name within it) and options
  if type(c.task) == "table" and c.task.module then
    return mech.task.load(c.task.module, c.task.options, c.task.seed, c.task.name)
  end
  if type(c.task) == "table" and c.task.preset then
    local opts = nil
    for k, v in pairs(c.task) do
      if k ~= "preset" and k ~= "seed" then opts = opts or {}; opts[k] = v end
    end
    return mech.task.preset(c.task.preset, c.task.seed or c.task_seed or c.seed, opts)
  end
  local t = c.task
  local has_dataset = (type(t) == "userdata" or type(t) == "table") and pcall(function() return t.dataset end)
    and type(t.dataset) == "function"
  if not has_dataset then
    error("train.run: 'task' expected a preset name, a task record (task:spec()), {preset = ...}, {module = ...} "
      .. "or a task object, got " .. (type(t) == "table" and "a table without kind, preset, module or dataset" or type(t)), 3)
  end
  return t
end
--- The task object of a config's `task` (a preset name, {preset, seed, rng, ...}, a task record
--- {kind, name, seed, options}, a Lua task's {module, name, options, seed} or a task object).
train.make_task = make_task

--- Evaluates `model` on dataset `ds` in batches; returns {accuracy, loss, prob, n}.
function train.evaluate(model, ds, batch)
  batch = batch or 64
  local correct, n, loss, prob = 0, 0, 0, 0
  local total = #ds
  for first = 0, total - 1, batch do
    local count = math.min(batch, total - first)
    local tokens, targets = ds:batch(first, count)
    local s = model:evaluate(tokens, targets)
    correct, n = correct + s.correct, n + s.n
    loss, prob = loss + s.loss * s.n, prob + s.prob_sum
  end
  return { accuracy = n > 0 and correct / n or 0, loss = n > 0 and loss / n or 0, prob = n > 0 and prob / n or 0, n = n }
end

local fmt_time = util.clock

-- The bar's loss and accuracy are the last training batch's; the latest evaluation stands beside.
local function progress_line(step, total, loss, acc, rate, eta, width, last_eval)
  local frac = total > 0 and step / total or 1
  local bar = string.rep("#", math.floor(frac * width + 0.5)) .. string.rep(".", width - math.floor(frac * width + 0.5))
  local ev = last_eval and string.format("  | %s@%d acc %5.1f%% loss %.4f", last_eval.split, last_eval.step,
    100 * last_eval.accuracy, last_eval.loss) or ""
  return string.format("\r[%s] %6d/%d  batch loss %.4f acc %5.1f%%%s  %.1f steps/s  ETA %s ", bar, step, total, loss,
    100 * acc, ev, rate, fmt_time(eta))
end

------------------------------------------------------------------------------------------------
-- The run directory: refusal, lock, resumption (see docs/training.md, "Run directories")

local run_files = { "manifest.json", "metrics.csv", "checkpoint.safetensors", "checkpoint-report.safetensors" }

local read_file = mech.sys.read_file -- nil when the file is missing

-- Temp files of checkpoint writes a kill interrupted (`checkpoint.safetensors.tmp.*`).
local function remove_temp_files(dir)
  local p = io.popen("ls -A '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  if not p then return end
  for name in p:lines() do
    if name:match("%.tmp%.") then os.remove(dir .. "/" .. name) end
  end
  p:close()
end

-- metrics.csv back to what a run resumed at `step` has not yet written: the rows of earlier
-- steps and the training rows of `step` itself (logged before its checkpoint was saved).
local function cut_metrics(path, step)
  local text = read_file(path)
  if not text then return end
  local kept = {}
  for line in text:gmatch("[^\n]+") do
    local st, split = line:match("^(%-?%d+),([^,]*),")
    st = tonumber(st)
    if not st or st < step or (st == step and split == "train") then kept[#kept + 1] = line end
  end
  mech.sys.write_atomic(path, table.concat(kept, "\n") .. "\n")
end

local function command_line()
  local parts = {}
  if type(arg) == "table" then
    local lo = 0
    while arg[lo - 1] do lo = lo - 1 end
    for i = lo, #arg do parts[#parts + 1] = tostring(arg[i]) end
  end
  return table.concat(parts, " ")
end

-- The config as recorded: what applies only (no `epochs` beside `steps`, no objects; a mixer
-- class given as `model.mixer` is recorded by its registered name).
local function recorded_config(c, task, model)
  local r = {}
  for k, v in pairs(c) do
    if type(v) ~= "function" and type(v) ~= "userdata" and k ~= "evaluators" and k ~= "lock" then r[k] = v end
  end
  if type(c.model) == "table" and type(c.model.mixer) == "table" then
    r.model = {}
    for k, v in pairs(c.model) do r.model[k] = v end
    r.model.mixer = model:config().arch
  end
  if c.steps then r.epochs = nil end
  if type(c.task) ~= "string" and not (type(c.task) == "table" and (c.task.preset or c.task.kind or c.task.module)) then
    r.task = task:name()
  end
  return r
end

-- Model options that do not apply to the architecture are -1 in model:config(); leave them out.
local function recorded_model(model)
  local m = {}
  for k, v in pairs(model:config()) do if v ~= -1 then m[k] = v end end
  return m
end

------------------------------------------------------------------------------------------------
-- The run in steps. `run` holds the config `c`, what is trained (task, model, opt, datasets),
-- where it is recorded (manifest, metrics) and how far it got; each step below does one job.

-- The model and optimiser, fresh or from the checkpoint being resumed.
local function open_model(run, ckpt_path)
  local c, task = run.c, run.task
  run.start = 0
  run.resume_from = type(c.resume) == "string" and c.resume or (c.resume and mech.sys.exists(ckpt_path) and ckpt_path)
  if run.resume_from then
    local meta
    -- the config's mixer (a module named by the user's code) is the one module the checkpoint may name
    local mixer = type(c.model) == "table" and c.model.mixer
    run.model, run.opt, meta = mech.load(run.resume_from, type(mixer) == "string" and { modules = { mixer } } or nil)
    if not run.opt then error("train.run: checkpoint '" .. run.resume_from .. "' holds no optimiser state", 0) end
    run.start = math.tointeger(tonumber(meta["train.step"])) or error("train.run: checkpoint has no train.step", 0)
    local want, have = c.precision or (type(c.model) == "table" and c.model.precision), run.model:config().precision or "fp32"
    if want and want ~= have then
      error(string.format("train.run: 'precision' is %s but checkpoint '%s' was trained in %s", want, run.resume_from, have), 0)
    end
    run.ckpt_total = math.tointeger(tonumber(meta["train.total"]))
  else
    local mc = {}
    for k, v in pairs(c.model) do mc[k] = v end
    mc.vocab = mc.vocab or task:vocab_size()
    mc.seed = mc.seed or c.seed
    mc.precision = mc.precision or c.precision
    run.model = mech.model(mc)
    run.opt = mech.adamw(run.model, { beta1 = c.beta1, beta2 = c.beta2, eps = c.eps, weight_decay = c.weight_decay })
  end
  if run.model:config().vocab < task:vocab_size() then
    error(string.format("train.run: the model's vocabulary (%d) is smaller than the task's (%d)",
      run.model:config().vocab, task:vocab_size()), 0)
  end
end

-- Steps per epoch and in all; a resumed checkpoint must belong to a run of the same length.
local function count_steps(run)
  local c = run.c
  run.per_epoch = c.train_docs // c.batch_size
  if run.per_epoch < 1 then error("train.run: fewer training documents than one batch", 0) end
  run.total = c.steps or run.per_epoch * c.epochs
  if run.ckpt_total and run.ckpt_total ~= run.total then
    error(string.format("train.run: the checkpoint %s belongs to a run of %d steps; this config has %d",
      run.resume_from, run.ckpt_total, run.total), 0)
  end
end

local function new_manifest(run, prior, started)
  local c = run.c
  run.manifest = {
    config = recorded_config(c, run.task, run.model), task = run.task:spec(), model = recorded_model(run.model), seed = c.seed,
    version = mech.version, git = mech.git, host = mech.sys.hostname(), vector_unit = mech.sys.vector_unit(),
    pid = mech.sys.getpid(),
    command = command_line(), threads = mech.threads(), params = run.model:n_params(), steps = run.total,
    start_time = prior and prior.start_time or started, status = "running", step = run.start,
    resumed_from = run.start, nonfinite = prior and prior.nonfinite,
  }
  -- wall time over every segment of a resumed run, up to its latest checkpoint or end
  run.wall_before = run.resume_from and prior and prior.wall_s or 0
end

local function wall_s(run) return run.wall_before + mech.sys.time() - run.t0 end

local function write_manifest(run)
  if run.c.out then mech.sys.write_atomic(run.c.out .. "/manifest.json", json.encode(run.manifest, "  ") .. "\n") end
end

-- A finished run resumed: its result as recorded, nothing appended.
local function finished_result(run, prior)
  return {
    status = "done", model = run.model, optimizer = run.opt, task = run.task, history = {}, steps = run.total,
    final = prior.final, eval = prior.eval, wall = prior.wall_s or 0, steps_per_second = prior.steps_per_s,
    manifest = prior,
  }
end

-- Data generated in advance and iterated in a fixed order, and the learning-rate schedule.
local function make_data(run)
  local c, task = run.c, run.task
  run.train_ds = task:dataset(c.train_docs, { seed = c.seed, split = "train" })
  run.eval_sets = {}
  for _, split in ipairs(c.eval_splits or { "test" }) do
    run.eval_sets[#run.eval_sets + 1] = { split = split, ds = task:dataset(c.eval_docs, { seed = c.seed, split = split }) }
  end
  -- the reported step's evaluation on more documents (report_docs), its standard error smaller:
  -- the datasets are prefix-stable, so its first eval_docs documents are the other steps' own
  if c.report_docs then
    run.report_sets = {}
    for _, split in ipairs(c.eval_splits or { "test" }) do
      run.report_sets[#run.report_sets + 1] = { split = split,
        ds = task:dataset(c.report_docs, { seed = c.seed, split = split }) }
    end
  end
  run.sched = mech.lr_schedule { kind = c.schedule, lr = c.lr, total = run.total, warmup = c.warmup }
end

-- metrics.csv cut back to the resumed step and opened for appending.
local function open_metrics(run)
  if run.c.out then
    cut_metrics(run.c.out .. "/metrics.csv", run.start)
    run.metrics = mech.sys.metrics(run.c.out .. "/metrics.csv")
  end
end

-- Every evaluation split at `step`, recorded, then the config's own evaluators that are due.
local function evaluate(run, step)
  local c, metrics = run.c, run.metrics
  local res = {}
  local sets = run.report_sets and step == (c.report_step or run.total) and run.report_sets or run.eval_sets
  for _, e in ipairs(sets) do
    local r = train.evaluate(run.model, e.ds, c.eval_batch)
    res[e.split] = r
    if metrics then
      metrics:append(step, e.split, "accuracy", r.accuracy)
      metrics:append(step, e.split, "loss", r.loss)
      metrics:append(step, e.split, "prob", r.prob)
    end
  end
  run.history[#run.history + 1] = { step = step, eval = res }
  for _, ev in ipairs(c.evaluators or {}) do
    if step % (ev.every or c.eval_every) == 0 or step == run.total then
      ev.fn(step, run.model, { task = run.task, metrics = metrics, eval_sets = sets, out = c.out,
        total = run.total })
    end
  end
  return res
end

-- The checkpoint of `step` and the manifest that points at it.
local function save(run, step)
  local c = run.c
  if not c.out then return end
  -- a checkpoint never holds NaN unnoticed (an update can break the parameters with a finite loss)
  local bad = c.on_nonfinite ~= "record" and run.model:nonfinite()
  if bad then
    error(string.format("train.run: parameter %s is not finite at step %d; the checkpoint was not written", bad,
      step), 0)
  end
  run.model:save(run.ckpt_path, { optimizer = run.opt, meta = {
    ["train.step"] = tostring(step), ["train.total"] = tostring(run.total), ["train.schedule"] = c.schedule,
    ["train.lr"] = string.format("%.17g", c.lr), ["train.warmup"] = string.format("%.17g", c.warmup),
    ["train.seed"] = tostring(c.seed), ["task.name"] = run.task:name(),
    -- the task's whole record: mech.task.from_checkpoint rebuilds it (docs/training.md)
    ["task.spec"] = json.encode(run.task:spec()),
  } })
  run.manifest.step = step -- what a resume would start from; `sweep status` shows it
  run.manifest.wall_s = wall_s(run)
  write_manifest(run)
end

local function rate(run) return run.done_steps / math.max(mech.sys.time() - run.t_loop, 1e-9) end

-- The evaluation of step `s`, kept as the latest and printed.
local function report_eval(run, s)
  local split = run.eval_sets[1].split
  run.final = evaluate(run, s)
  local main = run.final[split]
  run.last_eval = { split = split, step = s, accuracy = main.accuracy, loss = main.loss }
  if not run.c.quiet then
    if run.tty then io.write("\r\27[K") end
    print(string.format("step %d/%d  %s accuracy %.4f  loss %.4f  prob %.4f", s, run.total, split,
      main.accuracy, main.loss, main.prob))
  end
end

-- Update `s` on its batch, and what it logs.
local function update(run, s)
  local c, manifest, metrics = run.c, run.manifest, run.metrics
  local first = c.batch_size * (s % run.per_epoch)
  local tokens, targets = run.train_ds:batch(first, c.batch_size)
  local st = run.model:train_step(run.opt, tokens, targets, run.sched(s), c.on_nonfinite)
  run.last_loss, run.last_acc = st.loss, st.correct / math.max(st.n, 1)
  run.done_steps = run.done_steps + 1
  run.reached = s + 1
  if st.nonfinite then -- on_nonfinite = "record" (else train_step raised)
    manifest.nonfinite = manifest.nonfinite or { step = s, parameter = st.nonfinite,
      loss = st.loss ~= st.loss and "nan" or tostring(st.loss) }
    if metrics then metrics:append(s + 1, "train", "nonfinite", 1) end
  end
  if metrics and (s + 1) % c.log_every == 0 then
    metrics:append(s + 1, "train", "loss", st.loss)
    metrics:append(s + 1, "train", "lr", run.sched(s))
  end
  if c.checkpoint_every and (s + 1) % c.checkpoint_every == 0 then save(run, s + 1) end
end

local function show_progress(run, s)
  if not run.c.quiet and run.tty and ((s + 1) % 10 == 0 or s + 1 == run.total) then
    local r = rate(run)
    io.write(progress_line(s + 1, run.total, run.last_loss, run.last_acc, r, (run.total - s - 1) / r, 30,
      run.last_eval))
    io.flush()
  end
end

-- Steps start .. total: evaluate when due, stop at the end, at stop_at or on a signal (saving
-- where a later resume continues), else update.
local function loop(run)
  local c, total = run.c, run.total
  for s = run.start, total do
    run.reached = s
    if s % c.eval_every == 0 or s == total or (c.report_docs and s == c.report_step) then report_eval(run, s) end
    if s == total or s == run.stop_at then
      if s == run.stop_at and s ~= total then save(run, s) end
      break
    end
    run.signal = mech.sys.interrupted()
    if run.signal then
      save(run, s)
      break
    end
    update(run, s)
    show_progress(run, s)
  end
  if run.tty and not c.quiet then io.write("\n") end
  if run.stop_at == total and not run.signal then save(run, total) end
end

-- The manifest's closing record.
local function finish(run, status, err)
  local manifest = run.manifest
  if run.metrics then run.metrics:close(); run.metrics = nil end
  manifest.status, manifest.error, manifest.step = status, err, run.reached
  manifest.end_time, manifest.wall_s = mech.sys.utc(), wall_s(run)
  manifest.steps_per_s = rate(run)
  manifest.final = run.final and run.final[run.eval_sets[1].split] or nil
  manifest.eval = run.final
  write_manifest(run)
end

-- The run itself, with the run directory (if any) prepared and locked.
local function run_locked(c, t0, prior, ckpt_path, task)
  local run = { c = c, t0 = t0, ckpt_path = ckpt_path, task = task }
  local started = mech.sys.utc()
  open_model(run, ckpt_path)
  count_steps(run)
  new_manifest(run, prior, started)
  if prior and prior.status == "done" and run.start == run.total and c.resume then
    return finished_result(run, prior)
  end
  make_data(run)
  open_metrics(run)
  write_manifest(run)
  run.tty = c.progress
  if run.tty == nil then run.tty = mech.sys.isatty(1) end
  run.history, run.last_loss, run.last_acc, run.done_steps = {}, 0 / 0, 0, 0
  run.t_loop, run.stop_at, run.reached = mech.sys.time(), c.stop_at or run.total, run.start

  -- SIGINT/SIGTERM stop the loop at a step's end, where a checkpoint is whole
  mech.sys.catch_signals()
  local ok, err = pcall(loop, run)
  mech.sys.release_signals()
  local status = not ok and "failed" or run.signal and "interrupted" or run.reached == run.total and "done" or "stopped"
  finish(run, status, not ok and tostring(err) or nil)
  if not ok then error(err, 0) end

  local final = run.final
  return {
    status = status, signal = run.signal, step = run.reached, model = run.model, optimizer = run.opt, task = run.task,
    history = run.history, steps = run.total, final = final and final[run.eval_sets[1].split] or nil, eval = final,
    wall = mech.sys.time() - t0, steps_per_second = rate(run), manifest = run.manifest,
  }
end

function train.run(cfg)
  local c = check_config(cfg)
  if c.threads then mech.threads(c.threads) end
  local t0 = mech.sys.time()

  -- a bad task is refused before anything is written (docs/tasks.md)
  local task = make_task(c)

  -- run directory: refuse a directory holding a run unless resuming or overwriting; hold its lock
  local lock, own_lock, prior = c.lock, false, nil
  local ckpt_path = c.out and (c.out .. "/checkpoint.safetensors")
  local created, new_lock = {}, false -- what this call made, removed again if the run never starts
  if c.out then
    local dir = c.out:gsub("/+$", "")
    while dir ~= "" and dir ~= "." and not mech.sys.exists(dir) do
      created[#created + 1] = dir
      dir = dir:match("^(.*)/[^/]*$") or ""
    end
    new_lock = not mech.sys.exists(c.out .. "/lock")
    mech.sys.mkdir(c.out)
    if not lock then
      local holder
      lock, holder = mech.sys.lock(c.out .. "/lock")
      if not lock then error(string.format("train.run: run directory %s is in use by %s", c.out, holder), 2) end
      own_lock = true
    end
    local text = read_file(c.out .. "/manifest.json")
    prior = text and json.decode(text, c.out .. "/manifest.json") or nil
    local holds = prior ~= nil
    for _, f in ipairs(run_files) do holds = holds or mech.sys.exists(c.out .. "/" .. f) end
    if holds and not c.resume and not c.overwrite then
      if own_lock then lock:release() end
      error(string.format("train.run: %s already holds a run (status %s); pass resume = true to continue it or "
        .. "overwrite = true to replace it", c.out, prior and prior.status or "unknown"), 2)
    end
    if c.overwrite then
      for _, f in ipairs(run_files) do os.remove(c.out .. "/" .. f) end
      prior = nil
    end
    remove_temp_files(c.out)
  end
  local ok, result = pcall(run_locked, c, t0, prior, ckpt_path, task)
  -- a run refused before its manifest was written (a bad model config, say) leaves nothing behind
  local started = c.out and mech.sys.exists(c.out .. "/manifest.json")
  if not ok and c.out and not started then
    if own_lock and new_lock then os.remove(c.out .. "/lock") end
    for _, dir in ipairs(created) do os.remove(dir) end -- innermost first; only empty ones go
  end
  if own_lock then lock:release() end
  if not ok then error(result, 0) end
  return result
end

return train
