--- One run of a sweep, the unit every executor runs (`mechlab sweep exec DIR ID`): train.run in
--- the run's directory under its lock, with the report checkpoint and the sweep's evaluators.
local json = require "mech.json"
local train = require "mech.train"
local ic = require "mech.interchange"
local util = require "mech.util"
local store = require "mech.sweep.store"

local exec = {}
local copy, closest = util.copy, util.closest

local function fail(fn, msg, level) error("sweep." .. fn .. ": " .. msg, level or 3) end

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

exec.exit_codes = { SIGINT = 130, SIGTERM = 143 }

--- Trains one run of the sweep in DIR (the unit every executor runs). Returns an exit status:
--- 0 done, 1 failed (recorded in its manifest), 75 claimed by another live process, 130/143
--- interrupted by SIGINT/SIGTERM after saving a checkpoint.
function exec.run(dir, id)
  if type(dir) ~= "string" then fail("exec", "argument 1 expected a sweep directory, got " .. type(dir)) end
  if type(id) ~= "string" or id == "" then
    fail("exec", "argument 2 expected a run id, got " .. (id == "" and "an empty string" or type(id)))
  end
  local s = store.read(dir, "exec")
  local run
  for _, r in ipairs(s.runs) do if r.id == id then run = r end end
  if not run then
    local ids = {}
    for _, r in ipairs(s.runs) do ids[r.id] = true end
    fail("exec", string.format("no run '%s' in %s (did you mean '%s'?)", tostring(id), dir, closest(id, ids)))
  end
  local rdir = store.run_dir(dir, id)
  mech.sys.mkdir(rdir)
  local lock, holder = mech.sys.lock(rdir .. "/lock")
  if not lock then
    io.stderr:write(string.format("sweep exec: run %s is being trained by %s\n", id, holder))
    return 75
  end
  local prior = store.read_manifest(dir, id)
  if prior and prior.status == "done" then lock:release(); return 0 end
  local config = copy(run.config)
  config.out, config.resume, config.lock, config.progress = rdir, true, lock, false
  config.evaluators = make_evaluators(s.evaluators, run, rdir)
  -- report_docs evaluates the run's own reported step on more documents (docs/training.md)
  if config.report_docs then config.report_step = run.report_step end
  print(string.format("sweep exec: run %s of sweep %s (%s)", id, s.name, mech.sys.utc()))
  if prior and (prior.step or 0) > 0 then
    print(string.format("sweep exec: resuming run %s from its checkpoint at step %d", id, prior.step))
  end
  local ok, res = pcall(train.run, config)
  lock:release()
  if not ok then
    io.stderr:write("sweep exec: run " .. id .. " failed: " .. tostring(res) .. "\n")
    -- failures before train.run's own manifest (a bad config, say) still leave a record
    local m = store.read_manifest(dir, id)
    if not m or m.status ~= "failed" then
      mech.sys.write_atomic(rdir .. "/manifest.json", json.encode({ status = "failed", error = tostring(res),
        config = run.config, host = mech.sys.hostname(), end_time = mech.sys.utc() }, "  ") .. "\n")
    end
    pcall(require("mech.sweep.aggregate").run_rows, dir, s, run) -- a cache for aggregate; it rebuilds what is missing
    return 1
  end
  if res.status == "interrupted" then
    print(string.format("sweep exec: run %s interrupted by %s at step %d of %d; its checkpoint is saved and the next "
      .. "`sweep run` resumes it (%s)", id, res.signal, res.step, res.steps, mech.sys.utc()))
    return exec.exit_codes[res.signal] or 130
  end
  pcall(require("mech.sweep.aggregate").run_rows, dir, s, run)
  return 0
end

return exec
