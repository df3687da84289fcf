-- The sweep engine: expansion, ids, validation, the local and print executors, kills and
-- resumption, aggregation and selection.
local T = require "check"
local sweep = require "mech.sweep"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

local function read(path) return assert(mech.sys.read_file(path)) end

-- A small sweep: 2 archs × 2 learning rates, 20 steps each.
local function def(over)
  local d = {
    name = "t",
    base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320, eval_docs = 32, batch_size = 16,
      steps = 20, eval_every = 10, seed = 3 },
    grid = { lr = { 3e-3, 1e-2 }, arch = { "attention", "mamba" } },
    evaluators = { { kind = "interchange", at = "report", layers = { 0 }, components = { "block_input" } } },
  }
  for k, v in pairs(over or {}) do d[k] = v end
  return d
end

T.test("expansion is deterministic, in the canonical axis order, with stable ids", function()
  local a, b = sweep.load(def()), sweep.load(def())
  T.eq(#a.runs, 4)
  T.eq(a.axes, { "arch", "lr" })
  for i = 1, 4 do T.eq(a.runs[i].id, b.runs[i].id) end
  T.eq(a.runs[1].axes.arch, "attention")
  T.eq(a.runs[2].axes.arch, "attention")
  T.eq(a.runs[3].axes.arch, "mamba")
  T.truthy(a.runs[1].id:match("^attention%-lr0%.003%-%x%x%x%x%x%x%x%x$"), a.runs[1].id)
  T.eq(a.runs[1].config.model.arch, "attention")
  T.eq(a.runs[1].config.lr, 3e-3)
  T.eq(a.runs[1].config.threads, 1)
  T.eq(a.runs[1].report_step, 20)
  -- a different config is a different hash
  local c = sweep.load(def { base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320,
    eval_docs = 32, batch_size = 16, steps = 20, eval_every = 10, seed = 4 } })
  T.truthy(c.runs[1].id ~= a.runs[1].id)
end)

T.test("profiles replace axes and merge the base; cells override and exclude", function()
  local d = def {
    cell = function(c)
      if c.arch == "mamba" and c.lr == 1e-2 then return false end
      if c.arch == "attention" then c.pos_emb = true end
    end,
    profiles = { quick = { grid = { lr = { 1e-3 } }, base = { steps = 30, model = { d_model = 32 } } } },
  }
  local s = sweep.load(d)
  T.eq(#s.runs, 3)
  T.eq(s.runs[1].config.model.pos_emb, true)
  local q = sweep.load(d, "quick")
  T.eq(#q.runs, 2)
  T.eq(q.runs[1].config.steps, 30)
  T.eq(q.runs[1].config.model.d_model, 32)
  T.eq(q.runs[1].config.model.n_layers, 1)
  T.eq(q.profile, "quick")
end)

T.test("bad definitions get messages that name the fix", function()
  T.raises(function() sweep.load(def { grid = { lrr = { 1e-3 } } }) end, "unknown axis 'lrr' (did you mean 'lr'?)")
  T.raises(function() sweep.load(def { grid = {} }) end, "is empty")
  T.raises(function() sweep.load(def { grid = { lr = {} } }) end, "axis 'lr' expected a non-empty list")
  T.raises(function() sweep.load(def(), "qiuck") end, "has no profile 'qiuck'")
  T.raises(function() sweep.load(tmp .. "/nope.lua") end, "no sweep file")
  T.raises(function() sweep.load(def { gird = {} }) end, "unknown key 'gird'")
  T.raises(function()
    sweep.load(def { cell = function(c) c.lr = 1e-3 end })
  end, "have the same config")
  T.raises(function() sweep.load(def { cell = function() return false end }) end, "has no runs")
  T.raises(function() sweep.run(def(), { dir = tmp .. "/x", jobz = 2 }) end, "unknown option 'jobz' (did you mean 'jobs'?)")
end)

local function params_of(path)
  local m = mech.load(path)
  local out = {}
  for _, np in ipairs(m:named_parameters()) do out[np[1]] = np[2] end
  return out
end

local function same_params(a, b)
  local pa, pb = params_of(a), params_of(b)
  for name, t in pairs(pa) do
    if (t - pb[name]):abs():max():item() ~= 0 then return false, name end
  end
  return true
end

T.test("the progress line counts the directory, runs of another process on it included", function()
  -- another `sweep run` on the same directory holds one run (here: this test, by its lock) and
  -- ends it while this one trains the other; the last line must count it
  local file, dir = tmp .. "/share.lua", tmp .. "/share"
  mech.sys.write_atomic(file, [[
return { name = "share",
  base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320, eval_docs = 32, batch_size = 16,
    steps = 150, eval_every = 50, seed = 3 },
  grid = { arch = { "attention", "mamba" } } }
]])
  sweep.run(file, { dir = dir, executor = "print" })
  local runs = sweep.load(file).runs
  local mine, theirs = runs[1].id, runs[2].id
  mech.sys.mkdir(dir .. "/runs/" .. theirs)
  local lock = assert(mech.sys.lock(dir .. "/runs/" .. theirs .. "/lock"))
  local pid = mech.sys.spawn({ arg[-1], "sweep", "run", file, "--dir", dir, "--jobs", "1" }, tmp .. "/share.log")
  local t0 = mech.sys.time()
  while sweep.status(dir).runs[1].state ~= "running" and mech.sys.time() - t0 < 60 do mech.sys.sleep(0.01) end
  T.eq(sweep.status(dir).runs[1].state, "running", mine)
  mech.sys.write_atomic(dir .. "/runs/" .. theirs .. "/manifest.json", '{"status": "failed", "error": "theirs"}')
  lock:release()
  local _, code = mech.sys.wait(pid)
  T.eq(code, 1) -- the directory holds a failed run
  local log = read(tmp .. "/share.log")
  local last = log:match("(sweep share: [^\n]*)\n[^\n]*$") or log
  T.truthy(last:find("1/2 done, 0 running, 1 failed, 0 interrupted, 0 pending", 1, true), log)
end)

T.test("the local executor: 2 workers give the bits of 1; results are tidy", function()
  local r2 = sweep.run(def(), { dir = tmp .. "/two", jobs = 2 })
  local r1 = sweep.run(def(), { dir = tmp .. "/one", jobs = 1 })
  T.eq(r2.counts.done, 4)
  T.eq(r1.counts.done, 4)
  T.eq(read(tmp .. "/two/results.csv"), read(tmp .. "/one/results.csv"))
  for _, r in ipairs(sweep.load(def()).runs) do
    T.truthy(same_params(tmp .. "/two/runs/" .. r.id .. "/checkpoint.safetensors",
      tmp .. "/one/runs/" .. r.id .. "/checkpoint.safetensors"), r.id)
    T.truthy(mech.sys.exists(tmp .. "/one/runs/" .. r.id .. "/checkpoint-report.safetensors"))
  end
  local rows, header = sweep.results(tmp .. "/one")
  T.eq({ header[1], header[2], header[3], header[4], header[5] }, { "sweep", "run", "status", "task", "arch" })
  local kinds, attrib, se = {}, 0, 0
  for _, row in ipairs(rows) do
    kinds[row.step_kind] = true
    if row.metric:match("%.attrib$") then attrib = attrib + 1 end
    if row.metric:match("%.attrib_se$") then se = se + 1 end
  end
  T.truthy(kinds.report and kinds.final and kinds.best)
  T.truthy(attrib > 0, "interchange attributions at the reported step")
  T.eq(se, attrib, "each attribution with its standard error")
  -- a second run of the same sweep trains nothing
  local again = sweep.run(def(), { dir = tmp .. "/one", jobs = 2 })
  T.eq(again.counts.done, 4)
  T.truthy(again.wall < 5)
  local st = sweep.status(tmp .. "/one")
  T.eq(st.counts.done, 4)
  -- selection: the best lr per arch
  local chosen, selected = sweep.select(rows, { metric = "accuracy", split = "test", over = { "lr" } })
  T.eq(#chosen, 2)
  local n = 0
  for _ in pairs(selected) do n = n + 1 end
  T.eq(n, 2)
  T.eq(type(sweep.filter(rows, "0.KEY.query_item_orig.target_item_orig.block_input", 0.01)), "table")
end)

T.test("a directory of another definition is refused unless forced", function()
  T.raises(function()
    sweep.run(def { grid = { lr = { 1e-3 }, arch = { "mamba" } } }, { dir = tmp .. "/one" })
  end, "of another definition")
end)

T.test("the print executor prints one command per pending run", function()
  local p = io.popen(string.format("%q sweep run %q --dir %q --executor print --profile smoke 2>&1", arg[-1],
    "experiments/sweeps/tiny.lua", tmp .. "/print"))
  local out = p:read("a")
  p:close()
  local n = 0
  for line in out:gmatch("[^\n]+") do
    T.truthy(line:find(" sweep exec ", 1, true), line)
    n = n + 1
  end
  T.eq(n, 4)
end)

T.test("a failed run is recorded with its error and the sweep goes on", function()
  local d = def { grid = { lr = { 1e-2, 1e30 }, arch = { "mamba" } } }
  local res = sweep.run(d, { dir = tmp .. "/fail", jobs = 2 })
  T.eq(res.counts.done, 1)
  T.eq(res.counts.failed, 1)
  local step = tonumber(res.failed[1].error:match("^model:train_step: the loss became nan at step (%d+); "))
  T.truthy(step, res.failed[1].error)
  local st = sweep.status(tmp .. "/fail")
  T.eq(st.counts.failed, 1)
  for _, r in ipairs(st.runs) do -- the manifest keeps the step and the message
    if r.state == "failed" then
      T.eq(r.manifest.step, step)
      T.eq(r.manifest.error, res.failed[1].error)
    end
  end
end)

T.test("a killed worker's run resumes to the bits of an uninterrupted one", function()
  local d = def { name = "k", grid = { arch = { "mamba" }, lr = { 3e-3 } } }
  d.base.steps, d.base.checkpoint_every = 150, 25
  local s = sweep.load(d)
  local id = s.runs[1].id
  -- the reference, straight through
  sweep.run(d, { dir = tmp .. "/ref", jobs = 1 })
  -- a worker killed (SIGKILL, no chance to save) once it has a checkpoint, then one stopped by
  -- SIGTERM (it saves), then the sweep run again
  sweep.run(d, { dir = tmp .. "/kill", executor = "print" }) -- writes sweep.json only
  local rdir = tmp .. "/kill/runs/" .. id
  for _, sig in ipairs { "SIGKILL", "SIGTERM" } do
    mech.sys.mkdir(rdir)
    local pid = mech.sys.spawn({ arg[-1], "sweep", "exec", tmp .. "/kill", id }, rdir .. "/log.txt")
    local t0 = mech.sys.time()
    while mech.sys.time() - t0 < 30 do
      local f = io.open(rdir .. "/metrics.csv")
      local text = f and f:read("a") or ""
      if f then f:close() end
      local last = 0
      for step in text:gmatch("\n(%d+),train,loss") do last = tonumber(step) end
      if last >= (sig == "SIGKILL" and 40 or 80) then break end
      mech.sys.sleep(0.01)
    end
    mech.sys.kill(pid, sig)
    local _, code, signame = mech.sys.wait(pid)
    if sig == "SIGKILL" then T.eq(signame, "SIGKILL")
    else
      T.eq(code, 143)
      T.eq(sweep.status(tmp .. "/kill").counts.interrupted, 1)
    end
  end
  local res = sweep.run(d, { dir = tmp .. "/kill", jobs = 1 })
  T.eq(res.counts.done, 1)
  T.truthy(same_params(tmp .. "/ref/runs/" .. id .. "/checkpoint.safetensors", rdir .. "/checkpoint.safetensors"))
  -- metrics.csv has every step once
  local seen = {}
  for line in read(rdir .. "/metrics.csv"):gmatch("[^\n]+") do
    T.truthy(not seen[line:match("^[^,]*,[^,]*,[^,]*")], "duplicate row " .. line)
    seen[line:match("^[^,]*,[^,]*,[^,]*")] = true
  end
  T.eq(read(tmp .. "/ref/runs/" .. id .. "/metrics.csv"), read(rdir .. "/metrics.csv"))
  -- the run's log says where it was stopped and where it resumed
  local log, pid = read(rdir .. "/log.txt"), id:gsub("%p", "%%%0")
  T.truthy(log:find("sweep exec: run " .. pid .. " interrupted by SIGTERM at step %d+ of 150; its checkpoint is saved"),
    log)
  local _, resumed = log:gsub("sweep exec: resuming run " .. pid .. " from its checkpoint at step %d+", "")
  T.eq(resumed, 2, log) -- after the kill and after the SIGTERM
  -- an empty run id never reaches the run directories
  T.raises(function() sweep.exec(tmp .. "/kill", "") end, "argument 2 expected a run id, got an empty string")
end)

T.test("only: a part of a sweep, in the order given; a part of no id is an error", function()
  local dir, runs = tmp .. "/only", sweep.load(def()).runs -- attention lr 3e-3, 1e-2; mamba lr 3e-3, 1e-2
  local lines, print0 = {}, print
  print = function(line) lines[#lines + 1] = line end
  local ok, err = pcall(sweep.run, def(), { dir = dir, executor = "print", only = { "mamba", "lr0.003" } })
  print = print0
  assert(ok, err)
  T.eq(#lines, 3)
  for i, want in ipairs { runs[3].id, runs[4].id, runs[1].id } do T.truthy(lines[i]:find(want, 1, true), lines[i]) end
  local res = sweep.run(def(), { dir = dir, jobs = 1, only = "mamba-lr0.01" })
  T.eq(res.counts.done, 1)
  T.eq(res.counts.pending, 3)
  T.eq(sweep.status(dir).runs[4].state, "done")
  T.raises(function() sweep.run(def(), { dir = dir, executor = "print", only = { "mamba", "mamab" } }) end,
    "only: 'mamab' is part of no run's id")
  T.raises(function() sweep.run(def(), { dir = dir, executor = "print", only = {} }) end,
    "only expected a string or a non-empty list of strings, got an empty table")
  T.raises(function() sweep.run(def(), { dir = dir, executor = "print", only = { 3 } }) end,
    "only expected non-empty strings, got number in it")
end)

T.test("only: hostile values are errors that name it, and select nothing", function()
  local dir = tmp .. "/only-hostile"
  local boom = setmetatable({}, { __len = function() error("len called") end, __index = function() error("index") end })
  local hostile = { true, 0 / 0, print, boom, { {} }, { "mamba", false }, { ("x"):rep(1 << 20) }, { "a\0b" },
    { "%", "[" }, { "mamba", nil, "attention" }, setmetatable({}, { __index = function() return "mamba" end }) }
  for i, v in ipairs(hostile) do
    local lines, print0 = 0, print
    print = function() lines = lines + 1 end
    local ok, err = pcall(sweep.run, def(), { dir = dir, executor = "print", only = v })
    print = print0
    T.truthy(not ok, "hostile only #" .. i .. " was accepted")
    T.truthy(tostring(err):find("sweep.run: only", 1, true), "hostile only #" .. i .. ": " .. tostring(err))
    T.eq(lines, 0, "hostile only #" .. i .. " printed commands")
  end
end)

-- A sweep file holding def()'s definition (for tests that start mechlab processes).
local function sweep_file(name)
  local path = tmp .. "/" .. name .. ".lua"
  mech.sys.write_atomic(path, [[
return { name = "t",
  base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320, eval_docs = 32, batch_size = 16,
    steps = 20, eval_every = 10, seed = 3 },
  grid = { lr = { 3e-3, 1e-2 }, arch = { "attention", "mamba" } },
  evaluators = { { kind = "interchange", at = "report", layers = { 0 }, components = { "block_input" } } } }
]])
  return path
end

T.test("two `sweep run` on one directory train every run once", function()
  local file, dir = sweep_file("twice"), tmp .. "/twice"
  local cmd = string.format("%q sweep run %q --dir %q --jobs 2 >/dev/null 2>&1", arg[-1], file, dir)
  os.execute(cmd .. " & " .. cmd .. " & wait")
  T.eq(sweep.status(dir).counts.done, 4)
  for _, r in ipairs(sweep.load(def()).runs) do
    local _, starts = read(dir .. "/runs/" .. r.id .. "/metrics.csv"):gsub("\n0,test,accuracy,", "")
    T.eq(starts, 1, r.id .. " trained twice")
    T.eq(read(dir .. "/runs/" .. r.id .. "/metrics.csv"), read(tmp .. "/one/runs/" .. r.id .. "/metrics.csv"))
  end
end)

T.test("a run that cannot write (a full disk) fails cleanly and the sweep goes on", function()
  -- a file-size limit makes the checkpoint write fail (EFBIG) as a full disk would (ENOSPC)
  local file, dir = sweep_file("full"), tmp .. "/full"
  sweep.run(file, { dir = dir, executor = "print" })
  local id = sweep.load(def()).runs[1].id
  os.execute(string.format("trap '' XFSZ; ulimit -f 200; %q sweep exec %q %q >/dev/null 2>&1", arg[-1], dir, id))
  local st = sweep.status(dir)
  T.eq(st.counts.failed, 1)
  local m
  for _, r in ipairs(st.runs) do if r.id == id then m = r.manifest end end
  T.truthy(m and m.error and m.error:find("checkpoint", 1, true), m and m.error)
  local p = io.popen("ls -a " .. dir .. "/runs/" .. id)
  local files = p:read("a")
  p:close()
  T.truthy(not files:find(".tmp.", 1, true), "temporary files left: " .. files)
  T.truthy(not files:find("checkpoint.safetensors", 1, true), "a checkpoint was published: " .. files)
  -- with room again, the sweep trains it (--retry) and the rest
  local res = sweep.run(file, { dir = dir, jobs = 2, retry = true })
  T.eq(res.counts.done, 4)
end)

T.test("SIGTERM to `sweep run` stops its workers after their checkpoints; running it again ends with the same bits", function()
  local file, dir = tmp .. "/term.lua", tmp .. "/term"
  mech.sys.write_atomic(file, [[
return { name = "term",
  base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320, eval_docs = 32, batch_size = 16,
    steps = 150, eval_every = 50, checkpoint_every = 1000, seed = 3 },
  grid = { arch = { "attention", "mamba" } } }
]])
  sweep.run(file, { dir = tmp .. "/term-ref", jobs = 2 })
  local pid = mech.sys.spawn({ arg[-1], "sweep", "run", file, "--dir", dir, "--jobs", "2" }, tmp .. "/term.log")
  local ids = {}
  for _, r in ipairs(sweep.load(file).runs) do ids[#ids + 1] = r.id end
  local t0 = mech.sys.time()
  while mech.sys.time() - t0 < 60 do -- until both workers are past step 50
    local n = 0
    for _, id in ipairs(ids) do
      local f = io.open(dir .. "/runs/" .. id .. "/metrics.csv")
      if f then
        if f:read("a"):find("\n50,test,accuracy", 1, true) then n = n + 1 end
        f:close()
      end
    end
    if n == #ids then break end
    mech.sys.sleep(0.02)
  end
  mech.sys.kill(pid, "SIGTERM")
  local _, code = mech.sys.wait(pid)
  T.eq(code, 143)
  local st = sweep.status(dir)
  T.eq(st.counts.interrupted + st.counts.done, 2)
  T.truthy(st.counts.interrupted >= 1, "no run was interrupted")
  local left = 0 -- the steps the resumption trains (what its progress display counts)
  for _, r in ipairs(st.runs) do
    if r.state == "interrupted" then
      T.eq(r.manifest.status, "interrupted")
      left = left + 150 - r.manifest.step
    end
    T.truthy(mech.sys.exists(dir .. "/runs/" .. r.id .. "/checkpoint.safetensors"), "no checkpoint saved by " .. r.id)
  end
  local again = sweep.run(file, { dir = dir, jobs = 2 })
  T.eq(again.counts.done, 2)
  T.eq(again.steps, left)
  for _, id in ipairs(ids) do
    T.truthy(same_params(tmp .. "/term-ref/runs/" .. id .. "/checkpoint.safetensors", dir .. "/runs/" .. id .. "/checkpoint.safetensors"), id)
    T.eq(read(dir .. "/runs/" .. id .. "/metrics.csv"), read(tmp .. "/term-ref/runs/" .. id .. "/metrics.csv"))
  end
end)

T.test("status and aggregate read run directories only; the command line works", function()
  local p = io.popen(string.format("%q sweep status %q 2>&1", arg[-1], tmp .. "/fail"))
  local out = p:read("a")
  p:close()
  T.truthy(out:find("1/2 done", 1, true), out)
  T.truthy(out:find("failed", 1, true), out)
  T.truthy(out:find("(profile default)", 1, true), out) -- a sweep without profiles, as `sweep run` names it
  p = io.popen(string.format("%q sweep aggregate %q 2>&1", arg[-1], tmp .. "/fail"))
  out = p:read("a")
  p:close()
  T.truthy(out:find("result rows", 1, true), out)
  p = io.popen(string.format("%q sweep frobnicate 2>&1; echo \"exit $?\"", arg[-1]))
  out = p:read("a")
  p:close()
  T.truthy(out:find("unknown command 'frobnicate'", 1, true), out)
  T.truthy(out:find("exit 1", 1, true), out)
  -- lua-argparse: --help for each command (exit 0), and a mistyped option suggests the right one
  p = io.popen(string.format("%q sweep run --help 2>&1; echo \"exit $?\"", arg[-1]))
  out = p:read("a")
  p:close()
  T.truthy(out:find("Usage: mechlab sweep run", 1, true) and out:find("--max-parallel", 1, true), out)
  T.truthy(out:find("exit 0", 1, true), out)
  p = io.popen(string.format("%q sweep status %q --jbos 2 2>&1; echo \"exit $?\"", arg[-1], tmp .. "/fail"))
  out = p:read("a")
  p:close()
  T.truthy(out:find("unknown option '--jbos'", 1, true) and out:find("mechlab sweep status --help", 1, true), out)
  T.truthy(out:find("exit 1", 1, true) and not out:find("traceback", 1, true), out)
end)

T.test("aggregate uses the rows each worker cached, and only while they match the run", function()
  local dir = tmp .. "/fail"
  local s = sweep.status(dir)
  local done_id
  for _, r in ipairs(s.runs) do if r.state == "done" then done_id = r.id end end
  local rdir = dir .. "/runs/" .. done_id
  T.truthy(mech.sys.exists(rdir .. "/rows.cache"), "the worker wrote no rows.cache")
  sweep.aggregate(dir)
  local with_cache = read(dir .. "/results.csv") .. read(dir .. "/curves.csv")
  local cache = read(rdir .. "/rows.cache")
  for _, r in ipairs(s.runs) do os.remove(dir .. "/runs/" .. r.id .. "/rows.cache") end
  sweep.aggregate(dir)
  T.eq(read(dir .. "/results.csv") .. read(dir .. "/curves.csv"), with_cache)
  T.truthy(not mech.sys.exists(rdir .. "/rows.cache"), "aggregate wrote in a run directory")
  -- a cache whose rows are wrong is used while metrics.csv keeps its size ...
  mech.sys.write_atomic(rdir .. "/rows.cache", (cache:gsub(",test,accuracy,", ",test,accuracX,")))
  sweep.aggregate(dir)
  T.truthy(read(dir .. "/results.csv"):find("accuracX", 1, true), "the cache was not used")
  -- ... and ignored once metrics.csv changed
  local f = assert(io.open(rdir .. "/metrics.csv", "ab"))
  f:write("20,test,accuracy,0.125\n")
  f:close()
  sweep.aggregate(dir)
  local results = read(dir .. "/results.csv")
  T.truthy(not results:find("accuracX", 1, true), "a stale cache was used")
  T.truthy(results:find(done_id .. ",done,", 1, true) and results:find(",test,accuracy,final,20,0.125", 1, true), results)
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
