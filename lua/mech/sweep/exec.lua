--- One run of a sweep, the unit every executor runs (`mechlab sweep exec DIR ID`): train.run in
--- the run's directory under its lock, with the report checkpoint and the sweep's evaluators.
local json = require "mech.json"
local train = require "mech.train"
local ic = require "mech.interchange"
local util = require "mech.util"
local store = require "mech.sweep.store"
local definition = require "mech.sweep.definition"

local exec = {}
local copy, closest = util.copy, util.closest

local fail = util.failer("sweep.")

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
--- def (optional): {file = the definition file, profile = its profile} to take the run from, or
--- {hash = the definition hash the spawning `sweep run` computed}; without def the run comes from
--- sweep.json, checked against its recorded hash, and may not name a Lua module. def.log: this
--- process's output appended to the run's log.txt.
function exec.run(dir, id, def)
  if type(dir) ~= "string" then fail("exec", "argument 1 expected a sweep directory, got " .. type(dir)) end
  if type(id) ~= "string" or id == "" then
    fail("exec", "argument 2 expected a run id, got " .. (id == "" and "an empty string" or type(id)))
  end
  if not store.valid_id(id) then
    fail("exec", "argument 2 expected a run id (letters, digits, . - _ = and a dash and 8 hex digits at the end), got '"
      .. store.escape(id) .. "'")
  end
  def = def or {}
  local s
  if def.file then
    -- the runs of the definition the user names, recomputed; the directory must hold the same
    local fresh = definition.load(def.file, def.profile)
    local stored, diff = store.verify(dir, fresh, "exec")
    if not stored then
      fail("exec", string.format("%s/sweep.json does not hold the runs of %s (%s); run `mechlab sweep run %s --dir %s` "
        .. "(--force writes it anew from the definition)", store.escape(dir), store.escape(def.file), diff,
        store.escape(def.file), store.escape(dir)))
    end
    s = fresh
  else
    s = store.read_checked(dir, "exec", def.hash)
  end
  local run
  for _, r in ipairs(s.runs) do if r.id == id then run = r end end
  if not run then
    local ids = {}
    for _, r in ipairs(s.runs) do ids[r.id] = true end
    fail("exec", string.format("no run '%s' in %s (did you mean '%s'?)", id, store.escape(dir), closest(id, ids)))
  end
  if not def.file and not def.hash then
    local task, mixer = run.config.task, run.config.model and run.config.model.mixer
    local module = (type(task) == "table" and task.module) or (mixer ~= nil and mixer)
    if module then
      fail("exec", string.format("run %s names the Lua module '%s': modules are code, taken from the definition file "
        .. "only; pass it: `mechlab sweep exec %s %s --file FILE`", id, store.escape(type(module) == "table"
        and (module.module or "?") or module), store.escape(dir), id))
    end
  end
  local rdir = store.make_run_dir(dir, id, "exec")
  if def.log then mech.sys.redirect_output(rdir .. "/log.txt") end
  local lock, holder = mech.sys.lock(rdir .. "/lock")
  if not lock then
    io.stderr:write(string.format("sweep exec: run %s is being trained by %s\n", id, store.escape(holder)))
    return 75
  end
  local prior = store.read_manifest(dir, id)
  if prior and prior.status == "done" then lock:release(); return 0 end
  local config = copy(run.config)
  config.out, config.resume, config.lock, config.progress = rdir, true, lock, false
  config.evaluators = make_evaluators(s.evaluators, run, rdir)
  -- report_docs evaluates the run's own reported step on more documents (docs/training.md)
  if config.report_docs then config.report_step = run.report_step end
  print(string.format("sweep exec: run %s of sweep %s (%s)", id, store.escape(s.name), mech.sys.utc()))
  if prior and math.type(prior.step) == "integer" and prior.step > 0 then
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
    pcall(require("mech.sweep.aggregate").run_rows, dir, s, run, true) -- a cache for aggregate; it rebuilds what is missing
    return 1
  end
  if res.status == "interrupted" then
    print(string.format("sweep exec: run %s interrupted by %s at step %d of %d; its checkpoint is saved and the next "
      .. "`sweep run` resumes it (%s)", id, res.signal, res.step, res.steps, mech.sys.utc()))
    return exec.exit_codes[res.signal] or 130
  end
  pcall(require("mech.sweep.aggregate").run_rows, dir, s, run, true)
  return 0
end

return exec
