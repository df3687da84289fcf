-- The SLURM executor against a real cluster (scripts/slurm/up.sh; the README's test command
-- starts one). Skipped when SLURM_CONF is not set.
local T = require "check"
if not os.getenv("SLURM_CONF") then
  print("skipped: SLURM_CONF is not set (start a cluster with scripts/slurm/up.sh)")
  T.done()
end
local sweep = require "mech.sweep"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

local function read(path) return assert(mech.sys.read_file(path)) end

local function queued(jobs)
  local p = io.popen("squeue -h -o %i -j " .. table.concat(jobs, ",") .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out:match("%d") ~= nil
end

local function wait_jobs(jobs, seconds)
  local t0 = mech.sys.time()
  while queued(jobs) do
    if mech.sys.time() - t0 > seconds then error("jobs " .. table.concat(jobs, ",") .. " still queued after " .. seconds .. " s") end
    mech.sys.sleep(0.2)
  end
end

local function def(over)
  local d = {
    name = "sl",
    base = { task = "ar_32", model = { n_layers = 1, d_model = 16 }, train_docs = 320, eval_docs = 32, batch_size = 16,
      steps = 20, eval_every = 10, seed = 5 },
    grid = { arch = { "attention", "mamba" }, lr = { 3e-3, 1e-2 } },
    evaluators = { { kind = "interchange", at = "report", layers = { 0 }, components = { "block_input" } } },
  }
  for k, v in pairs(over or {}) do d[k] = v end
  return d
end

-- fn's printed lines, as one string (the submission line goes to stdout).
local function printed(fn)
  local lines, saved = {}, print
  print = function(...) -- luacheck: ignore
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    lines[#lines + 1] = table.concat(parts, "\t")
  end
  local ok, res = pcall(fn)
  print = saved
  if not ok then error(res, 0) end
  return table.concat(lines, "\n"), res
end

local function same_params(a, b)
  local ma, mb = mech.load(a), mech.load(b)
  for _, np in ipairs(ma:named_parameters()) do
    if (np[2] - mb:param(np[1])):abs():max():item() ~= 0 then return false end
  end
  return true
end

T.test("a sweep through SLURM: every run done, aggregated, the local executor's bits", function()
  local res = sweep.run(def(), { dir = tmp .. "/slurm", executor = "slurm" })
  T.eq(res.tasks, 4)
  wait_jobs({ res.array_job, res.aggregate_job }, 120)
  local st = sweep.status(tmp .. "/slurm")
  T.eq(st.counts.done, 4)
  T.truthy(mech.sys.exists(tmp .. "/slurm/results.csv"), "the aggregation job wrote results.csv")
  sweep.run(def(), { dir = tmp .. "/local", jobs = 2 })
  T.eq(read(tmp .. "/slurm/results.csv"), read(tmp .. "/local/results.csv"))
  for _, r in ipairs(sweep.load(def()).runs) do
    T.truthy(same_params(tmp .. "/slurm/runs/" .. r.id .. "/checkpoint.safetensors",
      tmp .. "/local/runs/" .. r.id .. "/checkpoint.safetensors"), r.id)
    T.truthy(read(tmp .. "/slurm/runs/" .. r.id .. "/log.txt"):find("sweep exec: run", 1, true))
  end
  -- nothing left to submit
  T.eq(sweep.run(def(), { dir = tmp .. "/slurm", executor = "slurm" }).tasks, 0)
end)

T.test("a task cancelled mid-run and submitted again resumes to the same bits", function()
  local d = def { name = "slc", grid = { arch = { "mamba" }, lr = { 3e-3 } } }
  -- long enough that the cancel lands mid-run in a Release build too, short for the sanitizers
  d.base.steps, d.base.checkpoint_every, d.base.log_every, d.base.eval_every = 400, 25, 5, 100
  local id = sweep.load(d).runs[1].id
  local res = sweep.run(d, { dir = tmp .. "/cancel", executor = "slurm" })
  local rdir = tmp .. "/cancel/runs/" .. id
  local t0 = mech.sys.time()
  repeat
    mech.sys.sleep(0.05)
    local f = io.open(rdir .. "/metrics.csv")
    local text = f and f:read("a") or ""
    if f then f:close() end
  until text:find("\n25,train,loss", 1, true) or mech.sys.time() - t0 > 60
  os.execute("scancel " .. res.array_job .. "_0")
  wait_jobs({ res.array_job, res.aggregate_job }, 60)
  local st = sweep.status(tmp .. "/cancel")
  T.eq(st.counts.interrupted, 1)
  local step = st.runs[1].manifest.step
  T.truthy(step > 0 and step < 400, "stopped at step " .. tostring(step))
  local out, again = printed(function() return sweep.run(d, { dir = tmp .. "/cancel", executor = "slurm" }) end)
  T.eq(again.tasks, 1)
  T.truthy(out:find("sweep slc (slurm): array job " .. again.array_job .. " (1 task, at most", 1, true), out)
  wait_jobs({ again.array_job, again.aggregate_job }, 120)
  T.eq(sweep.status(tmp .. "/cancel").counts.done, 1)
  sweep.run(d, { dir = tmp .. "/straight", jobs = 1 })
  T.truthy(same_params(tmp .. "/straight/runs/" .. id .. "/checkpoint.safetensors", rdir .. "/checkpoint.safetensors"),
    "resumed from step " .. step)
  T.eq(read(tmp .. "/straight/runs/" .. id .. "/metrics.csv"), read(rdir .. "/metrics.csv"))
end)

-- The state of every task of a job array, from the controller (it keeps finished jobs for MinJobAge).
local function task_states(array)
  local p = io.popen("scontrol show job -o " .. array .. " 2>&1")
  local states = {}
  for line in p:lines() do
    local task, state = line:match("ArrayTaskId=(%d+) .*JobState=(%u+)")
    if task then states[tonumber(task)] = state end
  end
  p:close()
  return states
end

T.test("a second submission while the first array is pending leaves its tasks their own runs", function()
  local d = def { name = "sl2", grid = { arch = { "attention", "mamba", "based" }, lr = { 3e-3 } } }
  d.base.steps = 150
  local dir = tmp .. "/twice"
  local first = sweep.run(d, { dir = dir, executor = "slurm", max_parallel = 1 })
  T.eq(first.tasks, 3)
  -- once the first task trains, the second submission has the two others: a list shorter than the
  -- first array's, whose pending task 2 once read an empty line of the shared runs.txt
  local t0 = mech.sys.time()
  repeat mech.sys.sleep(0.05)
  until sweep.status(dir).counts.running > 0 or mech.sys.time() - t0 > 60
  local out, second = printed(function() return sweep.run(d, { dir = dir, executor = "slurm", max_parallel = 1 }) end)
  T.eq(second.tasks, 2)
  T.truthy(out:find("sweep sl2 (slurm): array job " .. second.array_job .. " (2 tasks, at most 1 at once", 1, true), out)
  T.truthy(second.script ~= first.script, "each submission keeps its own script")
  wait_jobs({ first.array_job, first.aggregate_job, second.array_job, second.aggregate_job }, 180)
  T.eq(sweep.status(dir).counts.done, 3)
  for _, array in ipairs { first.array_job, second.array_job } do
    local states = task_states(array)
    for i = 0, (array == first.array_job and 2 or 1) do T.eq(states[i], "COMPLETED", "task " .. array .. "_" .. i) end
  end
  T.falsy(mech.sys.exists(dir .. "/runs/log.txt"), "a task trained under an empty run id")
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
