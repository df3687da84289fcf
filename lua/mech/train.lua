--- Training loop (paper.md §5): one call with a config table.
--
--   local train = require "mech.train"
--   local run = train.run{
--     model = {arch = "attention", d_model = 64, n_layers = 2, pos_emb = true},
--     task = "ar_32",                 -- a preset name, or a task object (mech.task.*)
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
local mech = require "mech"

local train = {}

local defaults = {
  model = {}, task = "ar_32", train_docs = 100032, eval_docs = 320, batch_size = 32, eval_batch = 64,
  epochs = 1, lr = 1e-3, schedule = "cosine", warmup = 0.1, weight_decay = 0, beta1 = 0.9, beta2 = 0.999,
  eps = 1e-8, eval_every = 200, log_every = 50, seed = 42, quiet = false,
}
-- keys without a default (nil unless given)
local optional = { "steps", "task_seed", "eval_splits", "out", "checkpoint_every", "resume", "threads", "progress",
  "evaluators", "stop_at" }

local function distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
    end
  end
  return d[#a][#b]
end

local function check_config(cfg)
  if type(cfg) ~= "table" then error("train.run: argument 1 expected a config table, got " .. type(cfg), 3) end
  local known = {}
  for k in pairs(defaults) do known[k] = true end
  for _, k in ipairs(optional) do known[k] = true end
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
  return c
end

local function make_task(c)
  if type(c.task) == "string" then return mech.task.preset(c.task, c.task_seed or c.seed) end
  if type(c.task) == "table" and c.task.preset then return mech.task.preset(c.task.preset, c.task.seed or c.seed) end
  return c.task
end

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

local function fmt_time(s)
  if s ~= s or s == math.huge then return "--:--" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%d:%02d:%02d", s // 3600, s // 60 % 60, s % 60) end
  return string.format("%02d:%02d", s // 60, s % 60)
end

local function progress_line(step, total, loss, acc, rate, eta, width)
  local frac = total > 0 and step / total or 1
  local bar = string.rep("#", math.floor(frac * width + 0.5)) .. string.rep(".", width - math.floor(frac * width + 0.5))
  return string.format("\r[%s] %6d/%d  loss %.4f  acc %5.1f%%  %.1f steps/s  ETA %s ", bar, step, total, loss,
    100 * acc, rate, fmt_time(eta))
end

function train.run(cfg)
  local c = check_config(cfg)
  if c.threads then mech.threads(c.threads) end
  local task = make_task(c)
  local t0 = mech.sys.time()

  -- model and optimiser (fresh or resumed)
  local model, opt, start = nil, nil, 0
  if c.resume then
    local meta
    model, opt, meta = mech.load(c.resume)
    if not opt then error("train.run: checkpoint '" .. c.resume .. "' holds no optimiser state", 2) end
    start = math.tointeger(tonumber(meta["train.step"])) or error("train.run: checkpoint has no train.step", 2)
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
      task:vocab_size()), 2)
  end

  -- data: generated in advance, iterated in a fixed order
  local train_ds = task:dataset(c.train_docs, { seed = c.seed, split = "train" })
  local eval_sets = {}
  for _, split in ipairs(c.eval_splits or { "test" }) do
    eval_sets[#eval_sets + 1] = { split = split, ds = task:dataset(c.eval_docs, { seed = c.seed, split = split }) }
  end
  local per_epoch = c.train_docs // c.batch_size
  if per_epoch < 1 then error("train.run: fewer training documents than one batch", 2) end
  local total = c.steps or per_epoch * c.epochs
  local sched = mech.lr_schedule { kind = c.schedule, lr = c.lr, total = total, warmup = c.warmup }

  -- run directory
  local metrics
  if c.out then
    mech.sys.mkdir(c.out)
    metrics = mech.sys.metrics(c.out .. "/metrics.csv")
  end
  local tty = c.progress
  if tty == nil then tty = mech.sys.isatty(1) end

  local history, final = {}, nil
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
        ev.fn(step, model, { task = task, metrics = metrics, eval_sets = eval_sets })
      end
    end
    return res
  end

  local function save(step)
    if not c.out then return end
    model:save(c.out .. "/checkpoint.safetensors", { optimizer = opt, meta = {
      ["train.step"] = tostring(step), ["train.total"] = tostring(total), ["train.schedule"] = c.schedule,
      ["train.lr"] = string.format("%.17g", c.lr), ["train.warmup"] = string.format("%.17g", c.warmup),
      ["train.seed"] = tostring(c.seed), ["task.name"] = task:name(),
    } })
  end

  local last_loss, last_acc, t_loop, done_steps = 0 / 0, 0, mech.sys.time(), 0
  local stop_at = c.stop_at or total
  for s = start, total do
    if s % c.eval_every == 0 or s == total then
      final = evaluate(s)
      local main = final[eval_sets[1].split]
      if not c.quiet and not tty then
        print(string.format("step %d/%d  %s accuracy %.4f  loss %.4f  prob %.4f", s, total, eval_sets[1].split,
          main.accuracy, main.loss, main.prob))
      end
    end
    if s == total or s == stop_at then
      if s == stop_at and s ~= total then save(s) end
      break
    end
    local first = c.batch_size * (s % per_epoch)
    local tokens, targets = train_ds:batch(first, c.batch_size)
    local st = model:train_step(opt, tokens, targets, sched(s))
    last_loss, last_acc = st.loss, st.correct / math.max(st.n, 1)
    done_steps = done_steps + 1
    if metrics and (s + 1) % c.log_every == 0 then
      metrics:append(s + 1, "train", "loss", st.loss)
      metrics:append(s + 1, "train", "lr", sched(s))
    end
    if c.checkpoint_every and (s + 1) % c.checkpoint_every == 0 then save(s + 1) end
    if not c.quiet and tty and ((s + 1) % 10 == 0 or s + 1 == total) then
      local el = mech.sys.time() - t_loop
      local rate = done_steps / math.max(el, 1e-9)
      io.write(progress_line(s + 1, total, last_loss, last_acc, rate, (total - s - 1) / rate, 30))
      io.flush()
    end
  end
  if tty and not c.quiet then io.write("\n") end
  local wall = mech.sys.time() - t0
  if stop_at == total then save(total) end

  local result = {
    model = model, optimizer = opt, task = task, history = history, steps = total,
    final = final and final[eval_sets[1].split] or nil, eval = final, wall = wall,
    steps_per_second = done_steps / math.max(mech.sys.time() - t_loop, 1e-9),
  }
  if c.out then
    metrics:close()
    local cfg_copy = {}
    for k, v in pairs(c) do
      if type(v) ~= "function" and k ~= "evaluators" and type(v) ~= "userdata" then cfg_copy[k] = v end
    end
    if type(c.task) ~= "string" then cfg_copy.task = task:name() end
    mech.sys.write_atomic(c.out .. "/manifest.json", json.encode({
      config = cfg_copy, model = model:config(), seed = c.seed, version = mech.version, git = mech.git,
      threads = mech.threads(), wall_seconds = wall, steps = total, params = model:n_params(),
      final = result.final,
    }, "  ") .. "\n")
  end
  return result
end

return train
