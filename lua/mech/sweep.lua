--- Sweeps: a grid of train.run configs as one Lua file, its runs on every core of this machine
--- (or on a SLURM cluster), resumable, with results in one tidy table. docs/sweeps.md is the
--- user's guide. This module is the API; each job has its file under lua/mech/sweep/:
---
---   definition.lua   a sweep file or table, its profile, the expansion into runs with stable ids
---   store.lua        the sweep directory and the state of every run, read from disk alone
---   exec.lua         one run (`mechlab sweep exec DIR ID`), under its directory's lock
---   workers.lua      the local executor: worker processes, progress, signals passed on
---   slurm.lua        the SLURM executor: a job array and an aggregation job
---   aggregate.lua    results.csv, curves.csv and summary.txt from the run directories
---   results.lua      reading results.csv; the paper's selection and filter
---   cli.lua          the command line
---
--- The directory layout:
---   DIR/sweep.json                 the definition's expansion: every run's id, axes and config
---   DIR/runs/<id>/                 a train.run directory (manifest.json, metrics.csv, checkpoints,
---                                  lock) plus log.txt and checkpoint-report.safetensors
---   DIR/results.csv, curves.csv, summary.txt      written by aggregate
local util = require "mech.util"
local definition = require "mech.sweep.definition"
local store = require "mech.sweep.store"
local exec = require "mech.sweep.exec"
local workers = require "mech.sweep.workers"
local aggregate = require "mech.sweep.aggregate"
local results = require "mech.sweep.results"

local sweep = {}

local fail = util.failer("sweep.")

--- The expanded runs of a sweep file or definition, without touching disk:
--- {name, profile, runs = {{id, axes, config, report_step, steps}, ...}, axes = {names in order}}.
sweep.load = definition.load
sweep.hash = definition.hash

--- Trains one run of the sweep in DIR. Returns an exit status: 0 done, 1 failed (recorded in its
--- manifest), 75 claimed by another live process, 130/143 interrupted by SIGINT/SIGTERM after
--- saving a checkpoint.
sweep.exec = exec.run

--- The state of every run of the sweep in DIR, from the run directories alone:
--- {name, profile, counts = {done, running, failed, interrupted, pending}, runs = {{id, state, manifest}}}.
sweep.status = store.status

--- Writes DIR/results.csv (tidy long form), DIR/curves.csv and DIR/summary.txt from the run
--- directories; returns the number of rows of results.csv.
sweep.aggregate = aggregate.write

sweep.results, sweep.select, sweep.filter = results.results, results.select, results.filter

-- opts.only: a string or a list of strings; nil for every run. Read raw (no metamethods) into a
-- fresh list; each must be part of some run's id (a typo would otherwise train nothing and say
-- nothing), and a list with holes is refused (ipairs would drop what follows a hole).
local function check_only(only, runs)
  if only == nil then return nil end
  if type(only) == "string" then only = { only } end
  local n, keys = type(only) == "table" and rawlen(only) or 0, 0
  if type(only) == "table" then
    for _ in next, only do keys = keys + 1 end
  end
  if n == 0 or keys ~= n then
    fail("run", "only expected a string or a non-empty list of strings, got " ..
      (type(only) ~= "table" and type(only) or n == 0 and "an empty table" or "a table with holes or other keys"))
  end
  local list = {}
  for i = 1, n do
    local part = rawget(only, i)
    if type(part) ~= "string" or part == "" then
      fail("run", "only expected non-empty strings, got " .. (part == "" and "an empty string" or type(part)) ..
        " in it")
    end
    local found = false
    for _, r in ipairs(runs) do found = found or r.id:find(part, 1, true) ~= nil end
    if not found then
      fail("run", string.format("only: '%s' is part of no run's id (the first is '%s')", part,
        runs[1] and runs[1].id or "none"))
    end
    list[i] = part
  end
  return list
end

-- The runs of todo whose id contains one of the parts (plain text), those of the first part first
-- (in sweep order), then those of the second: a part of a sweep, in the order that settles the
-- most first.
local function select_only(todo, only)
  local out, taken = {}, {}
  for _, part in ipairs(only) do
    for _, r in ipairs(todo) do
      if not taken[r.id] and r.id:find(part, 1, true) then out[#out + 1], taken[r.id] = r, true end
    end
  end
  return out
end

--- Runs a sweep: writes DIR/sweep.json, then trains every run not yet done with an executor.
--- opts: profile, dir (default results/<name>-<profile>), executor ("local", "slurm", "print"),
--- jobs (local workers; default the number of cores), force, retry (failed runs again),
--- aggregate (default true for the local executor), only (see select_only).
function sweep.run(file_or_table, opts)
  opts = opts or {}
  local known = { profile = 1, dir = 1, executor = 1, jobs = 1, force = 1, retry = 1, aggregate = 1, max_parallel = 1,
    steps_per_s = 1, partition = 1, account = 1, time_margin = 1, only = 1 }
  for k in pairs(opts) do
    if not known[k] then fail("run", string.format("unknown option '%s' (did you mean '%s'?)", tostring(k),
      util.closest(k, known))) end
  end
  local def, file = definition.read(file_or_table, "run")
  local d = definition.resolve(def, opts.profile, "run")
  local runs, order = definition.expand(d, "run")
  local s = { name = d.name, profile = d.profile, runs = runs, axes = order, evaluators = d.evaluators, select = d.select }
  local dir = opts.dir or ("results/" .. d.name .. "-" .. (d.profile or "default"))
  local executor = opts.executor or "local"
  if executor ~= "local" and executor ~= "slurm" and executor ~= "print" then
    fail("run", "executor expected \"local\", \"slurm\" or \"print\", got " .. tostring(executor))
  end
  if opts.jobs ~= nil and (math.type(opts.jobs) ~= "integer" or opts.jobs < 1) then
    fail("run", "jobs expected a positive integer, got " .. tostring(opts.jobs))
  end
  local only = check_only(opts.only, runs)
  local record = store.prepare(s, dir, file, opts.force)
  -- the workers take their runs from the same definition (its file, or its hash for a table)
  local def = { file = file, profile = d.profile, hash = record.definition_hash }
  local st = store.status(dir)
  local todo = {}
  for _, r in ipairs(st.runs) do
    if r.state == "pending" or r.state == "interrupted" or (r.state == "failed" and opts.retry) then
      todo[#todo + 1] = r
    end
  end
  if only then todo = select_only(todo, only) end
  if executor == "print" then return workers.print_commands(dir, todo, def) end
  if executor == "slurm" then
    local ok, slurm = pcall(require, "mech.sweep.slurm")
    if not ok then fail("run", "the slurm executor is not available: " .. tostring(slurm)) end
    local ids = {}
    for _, r in ipairs(todo) do ids[#ids + 1] = r.id end
    return slurm.submit(d.name, dir, ids, opts, def)
  end
  print(string.format("sweep %s (profile %s): %d runs, %d to train, in %s", d.name, d.profile or "default", #runs,
    #todo, dir))
  local res = workers.run(dir, todo, opts, def)
  if opts.aggregate ~= false and not res.signal then aggregate.write(dir) end
  res.dir = dir
  return res
end

--- `mechlab sweep ...` (lua/mech/sweep/cli.lua).
function sweep.main(...) return require("mech.sweep.cli").main(...) end

return sweep
