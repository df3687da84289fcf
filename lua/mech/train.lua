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
  "evaluators", "stop_at", "overwrite", "lock", "on_nonfinite" }

--- The default of a config key (nil for keys without one).
function train.default(key) return defaults[key] end

--- The keys a train.run config may hold (a set).
function train.config_keys()
  local keys = {}
  for k in pairs(defaults) do keys[k] = true end
  for _, k in ipairs(optional) do keys[k] = true end
  return keys
end

local distance = util.distance -- for did-you-mean

local function check_config(cfg)
  if type(cfg) ~= "table" then error("train.run: argument 1 expected a config table, got " .. type(cfg), 3) end
  local known = train.config_keys()
  for k in pairs(cfg) do
    if not known[k] then
      local best, bd = nil, math.huge
      for name in pairs(known) do
        local d = distance(tostring(k), name)
        if d < bd or (d == bd and name < best) then best, bd = name, d end
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
  return c
end

local function make_task(c)
  if type(c.task) == "string" then return mech.task.preset(c.task, c.task_seed or c.seed) end
  -- a task record as data (task:spec(): {kind, name, seed, options}), e.g. from a sweep file
  if type(c.task) == "table" and c.task.kind then return mech.task.from_spec(c.task) end
  if type(c.task) == "table" and c.task.preset then
    local opts = nil
    for k, v in pairs(c.task) do
      if k ~= "preset" and k ~= "seed" then opts = opts or {}; opts[k] = v end
    end
    return mech.task.preset(c.task.preset, c.task.seed or c.task_seed or c.seed, opts)
  end
  return c.task
end
--- The task object of a config's `task` (a preset name, {preset, seed, rng, ...}, a task record
--- {kind, name, seed, options} or a task object).
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
  if type(c.task) ~= "string" and not (type(c.task) == "table" and (c.task.preset or c.task.kind)) then
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

-- The run itself, with the run directory (if any) prepared and locked.
local function run_locked(c, t0, prior, ckpt_path)
  local task = make_task(c)
  local started = mech.sys.utc()

  -- model and optimiser (fresh or resumed)
  local model, opt, start, ckpt_total = nil, nil, 0, nil
  local resume_from = type(c.resume) == "string" and c.resume or (c.resume and mech.sys.exists(ckpt_path) and ckpt_path)
  if resume_from then
    local meta
    model, opt, meta = mech.load(resume_from)
    if not opt then error("train.run: checkpoint '" .. resume_from .. "' holds no optimiser state", 0) end
    start = math.tointeger(tonumber(meta["train.step"])) or error("train.run: checkpoint has no train.step", 0)
    ckpt_total = math.tointeger(tonumber(meta["train.total"]))
  else
    local mc = {}
    for k, v in pairs(c.model) do mc[k] = v end
    mc.vocab = mc.vocab or task:vocab_size()
    mc.seed = mc.seed or c.seed
    model = mech.model(mc)
    opt = mech.adamw(model, { beta1 = c.beta1, beta2 = c.beta2, eps = c.eps, weight_decay = c.weight_decay })
  end
  if model:config().vocab < task:vocab_size() then
    error(string.format("train.run: the model's vocabulary (%d) is smaller than the task's (%d)", model:config().vocab,
      task:vocab_size()), 0)
  end

  local per_epoch = c.train_docs // c.batch_size
  if per_epoch < 1 then error("train.run: fewer training documents than one batch", 0) end
  local total = c.steps or per_epoch * c.epochs
  if ckpt_total and ckpt_total ~= total then
    error(string.format("train.run: the checkpoint %s belongs to a run of %d steps; this config has %d", resume_from,
      ckpt_total, total), 0)
  end
  local manifest = {
    config = recorded_config(c, task, model), task = task:spec(), model = recorded_model(model), seed = c.seed,
    version = mech.version, git = mech.git, host = mech.sys.hostname(), pid = mech.sys.getpid(),
    command = command_line(), threads = mech.threads(), params = model:n_params(), steps = total,
    start_time = prior and prior.start_time or started, status = "running", step = start, resumed_from = start,
    nonfinite = prior and prior.nonfinite,
  }
  -- wall time over every segment of a resumed run, up to its latest checkpoint or end
  local wall_before = resume_from and prior and prior.wall_s or 0
  local function wall_s() return wall_before + mech.sys.time() - t0 end
  local function write_manifest()
    if c.out then mech.sys.write_atomic(c.out .. "/manifest.json", json.encode(manifest, "  ") .. "\n") end
  end

  -- a finished run resumed: returned as it is, nothing appended
  if prior and prior.status == "done" and start == total and c.resume then
    return {
      status = "done", model = model, optimizer = opt, task = task, history = {}, steps = total,
      final = prior.final, eval = prior.eval, wall = prior.wall_s or 0, steps_per_second = prior.steps_per_s,
      manifest = prior,
    }
  end

  -- data: generated in advance, iterated in a fixed order
  local train_ds = task:dataset(c.train_docs, { seed = c.seed, split = "train" })
  local eval_sets = {}
  for _, split in ipairs(c.eval_splits or { "test" }) do
    eval_sets[#eval_sets + 1] = { split = split, ds = task:dataset(c.eval_docs, { seed = c.seed, split = split }) }
  end
  local sched = mech.lr_schedule { kind = c.schedule, lr = c.lr, total = total, warmup = c.warmup }

  local metrics
  if c.out then
    cut_metrics(c.out .. "/metrics.csv", start)
    metrics = mech.sys.metrics(c.out .. "/metrics.csv")
  end
  write_manifest()
  local tty = c.progress
  if tty == nil then tty = mech.sys.isatty(1) end

  local history, final, last_eval = {}, nil, nil
  local function evaluate(step)
    local res = {}
    for _, e in ipairs(eval_sets) do
      local r = train.evaluate(model, e.ds, c.eval_batch)
      res[e.split] = r
      if metrics then
        metrics:append(step, e.split, "accuracy", r.accuracy)
        metrics:append(step, e.split, "loss", r.loss)
        metrics:append(step, e.split, "prob", r.prob)
      end
    end
    history[#history + 1] = { step = step, eval = res }
    for _, ev in ipairs(c.evaluators or {}) do
      if step % (ev.every or c.eval_every) == 0 or step == total then
        ev.fn(step, model, { task = task, metrics = metrics, eval_sets = eval_sets, out = c.out, total = total })
      end
    end
    return res
  end

  local function save(step)
    if not c.out then return end
    -- a checkpoint never holds NaN unnoticed (an update can break the parameters with a finite loss)
    local bad = c.on_nonfinite ~= "record" and model:nonfinite()
    if bad then
      error(string.format("train.run: parameter %s is not finite at step %d; the checkpoint was not written", bad,
        step), 0)
    end
    model:save(ckpt_path, { optimizer = opt, meta = {
      ["train.step"] = tostring(step), ["train.total"] = tostring(total), ["train.schedule"] = c.schedule,
      ["train.lr"] = string.format("%.17g", c.lr), ["train.warmup"] = string.format("%.17g", c.warmup),
      ["train.seed"] = tostring(c.seed), ["task.name"] = task:name(),
      -- the task's whole record: mech.task.from_checkpoint rebuilds it (docs/training.md)
      ["task.spec"] = json.encode(task:spec()),
    } })
    manifest.step = step -- what a resume would start from; `sweep status` shows it
    manifest.wall_s = wall_s()
    write_manifest()
  end

  local last_loss, last_acc, t_loop, done_steps = 0 / 0, 0, mech.sys.time(), 0
  local stop_at = c.stop_at or total
  local reached, signal = start, nil
  local function rate() return done_steps / math.max(mech.sys.time() - t_loop, 1e-9) end
  local function finish(status, err)
    if metrics then metrics:close(); metrics = nil end
    manifest.status, manifest.error, manifest.step = status, err, reached
    manifest.end_time, manifest.wall_s = mech.sys.utc(), wall_s()
    manifest.steps_per_s = rate()
    manifest.final = final and final[eval_sets[1].split] or nil
    manifest.eval = final
    write_manifest()
  end

  -- SIGINT/SIGTERM stop the loop at a step's end, where a checkpoint is whole
  mech.sys.catch_signals()
  local ok, err = pcall(function()
    for s = start, total do
      reached = s
      if s % c.eval_every == 0 or s == total then
        final = evaluate(s)
        local main = final[eval_sets[1].split]
        last_eval = { split = eval_sets[1].split, step = s, accuracy = main.accuracy, loss = main.loss }
        if not c.quiet then
          if tty then io.write("\r\27[K") end
          print(string.format("step %d/%d  %s accuracy %.4f  loss %.4f  prob %.4f", s, total, eval_sets[1].split,
            main.accuracy, main.loss, main.prob))
        end
      end
      if s == total or s == stop_at then
        if s == stop_at and s ~= total then save(s) end
        break
      end
      signal = mech.sys.interrupted()
      if signal then
        save(s)
        break
      end
      local first = c.batch_size * (s % per_epoch)
      local tokens, targets = train_ds:batch(first, c.batch_size)
      local st = model:train_step(opt, tokens, targets, sched(s), c.on_nonfinite)
      last_loss, last_acc = st.loss, st.correct / math.max(st.n, 1)
      done_steps = done_steps + 1
      reached = s + 1
      if st.nonfinite then -- on_nonfinite = "record" (else train_step raised)
        manifest.nonfinite = manifest.nonfinite or { step = s, parameter = st.nonfinite,
          loss = st.loss ~= st.loss and "nan" or tostring(st.loss) }
        if metrics then metrics:append(s + 1, "train", "nonfinite", 1) end
      end
      if metrics and (s + 1) % c.log_every == 0 then
        metrics:append(s + 1, "train", "loss", st.loss)
        metrics:append(s + 1, "train", "lr", sched(s))
      end
      if c.checkpoint_every and (s + 1) % c.checkpoint_every == 0 then save(s + 1) end
      if not c.quiet and tty and ((s + 1) % 10 == 0 or s + 1 == total) then
        local r = rate()
        io.write(progress_line(s + 1, total, last_loss, last_acc, r, (total - s - 1) / r, 30, last_eval))
        io.flush()
      end
    end
    if tty and not c.quiet then io.write("\n") end
    if stop_at == total and not signal then save(total) end
  end)
  mech.sys.release_signals()
  local status = not ok and "failed" or signal and "interrupted" or reached == total and "done" or "stopped"
  finish(status, not ok and tostring(err) or nil)
  if not ok then error(err, 0) end

  return {
    status = status, signal = signal, step = reached, model = model, optimizer = opt, task = task, history = history,
    steps = total, final = final and final[eval_sets[1].split] or nil, eval = final, wall = mech.sys.time() - t0,
    steps_per_second = rate(), manifest = manifest,
  }
end

function train.run(cfg)
  local c = check_config(cfg)
  if c.threads then mech.threads(c.threads) end
  local t0 = mech.sys.time()

  -- run directory: refuse a directory holding a run unless resuming or overwriting; hold its lock
  local lock, own_lock, prior = c.lock, false, nil
  local ckpt_path = c.out and (c.out .. "/checkpoint.safetensors")
  if c.out then
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
  local ok, result = pcall(run_locked, c, t0, prior, ckpt_path)
  if own_lock then lock:release() end
  if not ok then error(result, 0) end
  return result
end

return train
