-- report_docs (issue 42): the reported step is evaluated on more documents than the other steps,
-- whose documents are the first of them; a sweep evaluates its runs' own reported step so, and
-- its rows say how many documents they count.
local T = require "check"
local train = require "mech.train"
local sweep = require "mech.sweep"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

local function config(over)
  local c = { model = { arch = "attention", d_model = 16, n_layers = 1, pos_emb = true }, task = "ar_32",
    train_docs = 320, eval_docs = 32, batch_size = 16, steps = 20, eval_every = 10, lr = 3e-3, quiet = true, threads = 1 }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

-- metrics.csv as {step -> {split.metric -> value}}
local function metrics(dir)
  local by = {}
  for step, split, metric, value in assert(mech.sys.read_file(dir .. "/metrics.csv")):gmatch("(%d+),([^,\n]*),([^,\n]*),([^\n]*)\n") do
    step = tonumber(step)
    by[step] = by[step] or {}
    by[step][split .. "." .. metric] = tonumber(value)
  end
  return by
end

T.test("every task's evaluation documents are a prefix-stable stream", function()
  for _, task in ipairs { "ar_32", { preset = "pcfg_5_20", seed = 42, rng = "numpy" } } do
    local t = train.make_task { task = task, seed = 42 }
    local small, large = t:dataset(32, { seed = 42, split = "test" }), t:dataset(128, { seed = 42, split = "test" })
    local a, b = small:batch(0, 32), large:batch(0, 32)
    T.eq(a:shape(), b:shape())
    T.eq((a - b):abs():max():item(), 0)
  end
end)

T.test("the reported step counts report_docs documents, the others eval_docs", function()
  local seen = {}
  local ev = { every = 10, fn = function(step, _, ctx) seen[step] = #ctx.eval_sets[1].ds end }
  local dir = tmp .. "/run"
  local r = train.run(config { out = dir, report_docs = 128, evaluators = { ev } })
  -- the last step (the default report_step) on 128 documents, the same as evaluating them afresh
  local task = train.make_task(config())
  local direct = train.evaluate(r.model, task:dataset(128, { seed = 42, split = "test" }), 64)
  T.eq(r.final.n, direct.n)
  T.eq(r.final.accuracy, direct.accuracy)
  T.eq(seen, { [0] = 32, [10] = 32, [20] = 128 })
  local m = metrics(dir)
  T.eq(m[20]["test.accuracy"], direct.accuracy)
  -- steps 0 and 10 are the plain run's, bit for bit
  local plain = train.run(config { out = tmp .. "/plain" })
  local p = metrics(tmp .. "/plain")
  for _, s in ipairs { 0, 10 } do T.eq(m[s]["test.accuracy"], p[s]["test.accuracy"]) end
  T.eq(plain.final.n < r.final.n, true)
  -- a report_step off the cadence is evaluated too, on report_docs; the last step on eval_docs
  seen = {}
  train.run(config { report_docs = 128, report_step = 15, evaluators = { { every = 1, fn = function(step, _, ctx)
    seen[step] = #ctx.eval_sets[1].ds
  end } } })
  T.eq(seen, { [0] = 32, [10] = 32, [15] = 128, [20] = 32 })
end)

T.test("bad report_docs and report_step name the key", function()
  T.raises(function() train.run(config { report_docs = 0 }) end, "'report_docs' expected a positive integer, got 0")
  T.raises(function() train.run(config { report_docs = 1.5 }) end, "'report_docs' expected a positive integer, got 1.5")
  T.raises(function() train.run(config { report_docs = 64, report_step = -1 }) end,
    "'report_step' expected an integer >= 0, got -1")
  T.raises(function() train.run(config { report_step = 10 }) end, "'report_step' needs 'report_docs'")
end)

T.test("a sweep with a report_docs axis evaluates each run's reported step on them", function()
  local d = {
    name = "rd",
    base = config { quiet = nil, threads = nil, eval_every = 6 },
    grid = { arch = { "attention" }, report_docs = { 96 } },
    evaluators = { { kind = "interchange", at = "report", layers = { 0 }, components = { "block_input" } } },
  }
  local dir = tmp .. "/sweep"
  local res = sweep.run(d, { dir = dir, jobs = 1 })
  T.eq(res.counts.done, 1)
  local run = sweep.load(d).runs[1]
  T.eq(run.report_step, 18) -- the largest multiple of eval_every <= 20
  local m = metrics(dir .. "/runs/" .. run.id)
  local model = mech.load(dir .. "/runs/" .. run.id .. "/checkpoint-report.safetensors")
  local task = train.make_task(config())
  local direct = train.evaluate(model, task:dataset(96, { seed = 42, split = "test" }), 64)
  T.eq(m[18]["test.accuracy"], direct.accuracy)
  -- the final step (20) keeps eval_docs
  local final32 = train.evaluate(mech.load(dir .. "/runs/" .. run.id .. "/checkpoint.safetensors"),
    task:dataset(32, { seed = 42, split = "test" }), 64)
  T.eq(m[20]["test.accuracy"], final32.accuracy)
  -- the rows name the documents: report_docs is a column
  local rows = sweep.results(dir)
  T.eq(rows[1].report_docs, 96)
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
