-- Run records: a run directory is never mixed, is locked while trained, resumes cleanly, and a
-- signal or a non-finite loss leaves a checkpoint and a manifest that say what happened.
local T = require "check"
local train = require "mech.train"
local json = require "mech.json"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

local function read(path) return assert(mech.sys.read_file(path)) end

local function config(over)
  local c = { model = { arch = "mamba", d_model = 16, n_layers = 1 }, task = "ar_32", train_docs = 320, eval_docs = 32,
    batch_size = 16, steps = 40, eval_every = 10, log_every = 5, lr = 3e-3, quiet = true, threads = 1 }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local function same_params(a, b)
  local ma, mb = mech.load(a), mech.load(b)
  for _, np in ipairs(ma:named_parameters()) do
    if (np[2] - mb:param(np[1])):abs():max():item() ~= 0 then return false end
  end
  return true
end

T.test("a directory holding a run is refused unless resuming or overwriting", function()
  local dir = tmp .. "/a"
  local r = train.run(config { out = dir })
  T.eq(r.status, "done")
  local before = read(dir .. "/metrics.csv")
  T.raises(function() train.run(config { out = dir }) end, "already holds a run (status done); pass resume = true")
  T.eq(read(dir .. "/metrics.csv"), before)
  -- resuming a finished run appends nothing
  local again = train.run(config { out = dir, resume = true })
  T.eq(again.status, "done")
  T.eq(read(dir .. "/metrics.csv"), before)
  -- overwrite replaces the files as a whole
  train.run(config { out = dir, overwrite = true, steps = 20 })
  local m = json.decode(read(dir .. "/manifest.json"))
  T.eq(m.steps, 20)
  T.truthy(not read(dir .. "/metrics.csv"):find("\n40,", 1, true))
  T.raises(function() train.run(config { out = dir, overwrite = true, resume = true }) end, "exclude each other")
end)

T.test("a run holds its directory's lock; a second one refuses naming the holder", function()
  local dir = tmp .. "/b"
  mech.sys.mkdir(dir)
  local lk = mech.sys.lock(dir .. "/lock")
  T.raises(function() train.run(config { out = dir }) end, "is in use by " .. mech.sys.hostname() .. " " .. mech.sys.getpid())
  -- the holder may pass its lock
  local r = train.run(config { out = dir, lock = lk })
  T.eq(r.status, "done")
  T.truthy(lk:held())
  lk:release()
  local again, holder = mech.sys.lock(dir .. "/lock")
  T.truthy(again, holder)
  again:release()
end)

T.test("resume cuts metrics.csv back to the checkpoint: no step twice, the bits of a straight run", function()
  local straight, split = tmp .. "/straight", tmp .. "/split"
  train.run(config { out = straight })
  local r = train.run(config { out = split, stop_at = 17, checkpoint_every = 5 })
  T.eq(r.status, "stopped")
  local first = json.decode(read(split .. "/manifest.json"))
  -- a killed run would leave rows after its last checkpoint, and a temp file: simulate both
  local f = assert(io.open(split .. "/metrics.csv", "a"))
  f:write("18,train,loss,9\n20,test,accuracy,0.5\n")
  f:close()
  assert(io.open(split .. "/checkpoint.safetensors.tmp.123", "w")):close()
  local r2 = train.run(config { out = split, resume = true })
  T.eq(r2.status, "done")
  local m = json.decode(read(split .. "/manifest.json"))
  T.truthy(m.wall_s > first.wall_s, "the wall time adds up the segments")
  T.eq(m.resumed_from, 17) -- stop_at checkpoints where it stops
  T.eq(read(split .. "/metrics.csv"), read(straight .. "/metrics.csv"))
  T.truthy(same_params(straight .. "/checkpoint.safetensors", split .. "/checkpoint.safetensors"))
  T.truthy(not mech.sys.exists(split .. "/checkpoint.safetensors.tmp.123"), "temp files are removed")
  T.raises(function() train.run(config { out = split, resume = true, steps = 50 }) end, "belongs to a run of 40 steps")
end)

T.test("the manifest records what applies, where and when", function()
  local m = json.decode(read(tmp .. "/straight/manifest.json"))
  T.eq(m.status, "done")
  T.eq(m.step, 40)
  T.eq(m.host, mech.sys.hostname())
  T.eq(m.vector_unit, mech.sys.vector_unit())
  T.truthy(({ avx512 = 1, avx2 = 1, baseline = 1, native = 1 })[m.vector_unit], m.vector_unit)
  T.truthy(m.start_time:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"), m.start_time)
  T.truthy(m.end_time and m.command and m.version and m.git and m.steps_per_s and m.wall_s)
  T.eq(m.config.epochs, nil) -- steps was given
  -- the task's whole record: kind, name, seed and every option
  T.eq(m.task.kind, "ar")
  T.eq(m.task.name, "ar_32")
  T.eq(m.task.seed, 42)
  T.eq(m.task.options.num_kv, 8192)
  T.eq(m.task.options.max_length, 32)
  local a = train.run(config { out = tmp .. "/att", model = { arch = "attention", d_model = 16, n_layers = 1 }, steps = 2 })
  T.eq(a.status, "done")
  local ma = json.decode(read(tmp .. "/att/manifest.json"))
  T.eq(ma.model.d_conv, nil) -- attention has no short convolution
  T.eq(ma.model.arch, "attention")
end)

T.test("a non-finite loss stops the run naming the step and the parameter", function()
  local dir = tmp .. "/nan"
  T.raises(function() train.run(config { out = dir, lr = 1e30 }) end, "became nan at step")
  local m = json.decode(read(dir .. "/manifest.json"))
  T.eq(m.status, "failed")
  T.truthy(m.error:find("^model:train_step: the loss became nan at step %d+; "), m.error)
  local r = train.run(config { out = tmp .. "/nan2", lr = 1e30, on_nonfinite = "record" })
  T.eq(r.status, "done")
  T.truthy(read(tmp .. "/nan2/metrics.csv"):find(",train,nonfinite,1", 1, true))
  local m2 = json.decode(read(tmp .. "/nan2/manifest.json"))
  T.eq(m2.nonfinite.loss, "nan")
  T.truthy(m2.nonfinite.step >= 0 and m2.nonfinite.step < 40, m2.nonfinite.step)
end)

T.test("SIGTERM saves a checkpoint marked interrupted; resuming gives the straight run's bits", function()
  local dir = tmp .. "/term"
  local script = tmp .. "/term.lua"
  local f = assert(io.open(script, "w"))
  f:write(string.format([[
    local train = require "mech.train"
    local r = train.run{ model = { arch = "mamba", d_model = 16, n_layers = 1 }, task = "ar_32", train_docs = 320,
      eval_docs = 32, batch_size = 16, steps = 150, eval_every = 20, log_every = 5, lr = 3e-3, quiet = true,
      threads = 1, out = %q }
    os.exit(r.status == "interrupted" and 143 or 0)
  ]], dir))
  f:close()
  local pid = mech.sys.spawn({ arg[-1], script }, tmp .. "/term.log")
  local t0 = mech.sys.time()
  while mech.sys.time() - t0 < 60 do
    local m = io.open(dir .. "/metrics.csv")
    local text = m and m:read("a") or ""
    if m then m:close() end
    if text:find("\n50,train,loss", 1, true) then break end
    mech.sys.sleep(0.01)
  end
  mech.sys.kill(pid, "SIGTERM")
  local _, code = mech.sys.wait(pid)
  T.eq(code, 143)
  local m = json.decode(read(dir .. "/manifest.json"))
  T.eq(m.status, "interrupted")
  T.truthy(m.step > 0 and m.step < 150, tostring(m.step))
  local ckpt_step = m.step
  local function run(out, resume)
    return train.run { model = { arch = "mamba", d_model = 16, n_layers = 1 }, task = "ar_32", train_docs = 320,
      eval_docs = 32, batch_size = 16, steps = 150, eval_every = 20, log_every = 5, lr = 3e-3, quiet = true,
      threads = 1, out = out, resume = resume }
  end
  local r = run(dir, true)
  T.eq(r.status, "done")
  local straight = run(tmp .. "/term_straight")
  T.eq(straight.status, "done")
  T.truthy(same_params(dir .. "/checkpoint.safetensors", tmp .. "/term_straight/checkpoint.safetensors"),
    "interrupted at step " .. ckpt_step)
  T.eq(read(dir .. "/metrics.csv"), read(tmp .. "/term_straight/metrics.csv"))
end)

-- the documents of two tasks, token for token, and their positions
local function same_docs(a, b, n, opts)
  local da, db = a:dataset(n, opts), b:dataset(n, opts)
  local ta, ga, pa = da:batch(0, n)
  local tb, gb, pb = db:batch(0, n)
  if ta:size(1) ~= tb:size(1) then return false end
  if (ta - tb):abs():max():item() ~= 0 or (ga - gb):abs():max():item() ~= 0 then return false end
  for k, col in pairs(pa) do
    if type(col[1]) == "number" then
      for i = 1, n do if col[i] ~= pb[k][i] then return false end end
    end
  end
  return true
end

T.test("a checkpoint carries its task: numpy-mode ATR (task seed 42, training seed 1) round-trips exactly", function()
  local task = mech.task.preset("pcfg_5_20", 42, { rng = "numpy" })
  local dir = tmp .. "/atr_numpy"
  train.run(config { out = dir, task = task, seed = 1, steps = 2, train_docs = 64, eval_docs = 16,
    model = { arch = "attention", d_model = 8, n_layers = 1 } })
  local path = dir .. "/checkpoint.safetensors"
  local _, _, meta = mech.load(path)
  for _, back in ipairs { mech.task.from_checkpoint(path), mech.task.from_checkpoint(meta) } do
    T.eq(back:name(), "pcfg_5_20")
    T.eq(back:config(), task:config())
    T.eq(back:spec(), task:spec())
    T.truthy(same_docs(back, task, 64, { split = "train" }), "the same grammar and documents")
    T.truthy(same_docs(back, task, 32, { split = "test" }), "the same test documents")
  end
  -- the old reading (a preset name at the training seed) gives another grammar: what the record fixes
  T.truthy(not same_docs(mech.task.preset("pcfg_5_20", 1), task, 64, { split = "train" }))
  -- the manifest holds the same record
  local m = json.decode(read(dir .. "/manifest.json"))
  T.eq(m.task.seed, 42)
  T.eq(m.task.options.rng, "numpy")
  T.truthy(same_docs(mech.task.from_spec(m.task), task, 64, { split = "train" }))
end)

T.test("a task built by hand, and MQAR, come back from the checkpoint; older checkpoints as well as possible", function()
  for _, task in ipairs { mech.task.ar { num_kv = 32, length = 4, seed = 7 },
    mech.task.mqar { vocab_size = 64, input_seq_len = 32, num_kv_pairs = 4, power_a = 0.5, num_passes = 2,
      random_non_queries = false, seed = 3 } } do
    local dir = tmp .. "/own_" .. task:kind()
    train.run(config { out = dir, task = task, steps = 1, train_docs = 16, eval_docs = 8,
      model = { arch = "attention", d_model = 8, n_layers = 1 } })
    local back = mech.task.from_checkpoint(dir .. "/checkpoint.safetensors")
    T.eq(back:spec(), task:spec())
    T.truthy(same_docs(back, task, 16, { split = "test", seed = 5 }))
  end
  -- a record as the config's task (data, as a sweep file holds it) trains on that task
  local spec = mech.task.mqar { vocab_size = 32, input_seq_len = 16, num_kv_pairs = 2, seed = 4 }:spec()
  local r = train.run(config { out = tmp .. "/from_spec", task = spec, steps = 1, train_docs = 16, eval_docs = 8,
    model = { arch = "attention", d_model = 8, n_layers = 1 } })
  T.eq(r.task:spec(), spec)
  T.eq(json.decode(read(tmp .. "/from_spec/manifest.json")).config.task, spec)
  T.eq(mech.task.from_checkpoint(tmp .. "/from_spec/checkpoint.safetensors"):spec(), spec)
  -- a checkpoint without a record: the preset of task.name at the training seed
  local m = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 16 }
  local p = tmp .. "/old.safetensors"
  m:save(p, { meta = { ["task.name"] = "ar_32", ["train.seed"] = "9" } })
  T.eq(mech.task.from_checkpoint(p):spec(), mech.task.preset("ar_32", 9):spec())
  -- only the kind: rebuilt from the manifest.json beside it (written before records: options + seed)
  mech.sys.mkdir(tmp .. "/oldrun")
  m:save(tmp .. "/oldrun/checkpoint.safetensors", { meta = { ["task.name"] = "ar", ["train.seed"] = "42" } })
  local t = mech.task.ar { num_kv = 32, length = 4, seed = 11 }
  mech.sys.write_atomic(tmp .. "/oldrun/manifest.json", json.encode { task = t:config() })
  local back = mech.task.from_checkpoint(tmp .. "/oldrun/checkpoint.safetensors")
  T.eq(back:spec().options, t:spec().options)
  T.eq(back:spec().seed, 11)
  -- only the kind and no manifest: nil and why
  m:save(p, { meta = { ["task.name"] = "ar" } })
  local none, why = mech.task.from_checkpoint(p)
  T.eq(none, nil)
  T.truthy(why:find("records only the task's name 'ar'", 1, true), why)
  none, why = mech.task.from_checkpoint("tests/fixtures/checkpoints_v1/attention.safetensors")
  T.eq(none, nil)
  T.truthy(why:find("records no task", 1, true), why)
  -- bad input
  T.raises(function() mech.task.from_checkpoint(42) end, "bad argument #1 to 'mech.task.from_checkpoint' (a checkpoint path or mech.load's metadata table expected, got 42)")
  T.raises(function() mech.task.from_checkpoint(tmp .. "/missing.safetensors") end, "missing.safetensors")
  T.raises(function() mech.task.from_checkpoint { ["task.spec"] = "{nope" } end, "task.spec is not valid JSON")
  T.raises(function() mech.task.from_spec { kind = "copy" } end, "field 'kind' expected")
  T.raises(function() mech.task.from_spec { kind = "ar", options = { num_kv = "x" } } end, "num_kv")
  T.raises(function() mech.task.from_spec { kind = "ar", colour = 1 } end, "colour")
  -- an option beside kind is told to go under options (not "did you mean 'module'")
  T.raises(function() mech.task.from_spec { kind = "ar", num_kv = 4 } end,
    "bad argument #1 to 'mech.task.from_spec' ('num_kv' is a task option: it goes under 'options'")
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
