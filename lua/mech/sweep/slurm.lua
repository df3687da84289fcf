--- The SLURM executor of mech.sweep: one job array with a task per pending run, and an
--- aggregation job that waits for the array. docs/slurm.md explains the choices.
---
---   DIR/slurm/array-<n>.sbatch   the n-th submission's batch script; it holds its own run ids and
---                                task i trains the i-th (0-based). SLURM keeps a copy of the script
---                                from submission on, so a later submission never changes what the
---                                tasks of an earlier one, still pending, will train
---   DIR/slurm/<job>_<task>.out   each task's own messages (the run's output goes to runs/<id>/log.txt)
local util = require "mech.util"

local slurm = {}

local function fail(msg) error("sweep (slurm): " .. msg, 3) end

local q, hms = util.shell_quote, util.hms

-- Runs a command; its output and whether it exited 0.
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

-- Steps per second a run can count on: the slowest finished run of this sweep, else opts.steps_per_s,
-- else 10 (a 2-layer d = 256 model on one core does about 14).
local function step_rate(dir, ids, opts)
  if opts.steps_per_s then return opts.steps_per_s end
  local slowest
  local store = require "mech.sweep.store"
  for _, r in ipairs(store.read(dir, "run").runs) do
    local m = store.read_manifest(dir, r.id)
    if m and m.status == "done" and m.steps_per_s and m.steps_per_s > 0 then
      slowest = math.min(slowest or math.huge, m.steps_per_s)
    end
  end
  return slowest or 10
end

-- The time limit of a task: the longest run's steps at the assumed rate, with a margin, at least
-- 10 minutes. A task that reaches it is signalled first, saves, and requeues itself.
local function time_limit(dir, ids, opts)
  local s = require("mech.sweep.store").read(dir, "run")
  local steps, wanted = 0, {}
  for _, id in ipairs(ids) do wanted[id] = true end
  for _, r in ipairs(s.runs) do if wanted[r.id] then steps = math.max(steps, r.steps) end end
  local margin = opts.time_margin or 1.5
  return math.max(600, steps / step_rate(dir, ids, opts) * margin + 300)
end

local function plural(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

-- A path for this submission's script that no earlier submission used.
local function new_script(sdir)
  local n = 1
  while mech.sys.exists(string.format("%s/array-%d.sbatch", sdir, n)) do n = n + 1 end
  return string.format("%s/array-%d.sbatch", sdir, n)
end

--- Submits the runs `ids` of the sweep `name` in `dir` (already prepared by sweep.run) as a job array.
--- opts: max_parallel (the %K throttle, default 64), steps_per_s, time_margin (1.5), partition,
--- account. def: the definition's {file, profile, hash}, which every task passes to `sweep exec`
--- (workers.exec_args). Returns {array_job, aggregate_job, script, tasks}.
function slurm.submit(name, dir, ids, opts, def)
  opts = opts or {}
  if #ids == 0 then
    print(string.format("sweep %s (slurm): every run is done or running; nothing to submit", name))
    return { tasks = 0 }
  end
  local _, has_sbatch = sh("command -v sbatch")
  if not has_sbatch then fail("sbatch is not on PATH (is this a SLURM login node?)") end
  if not os.getenv("SLURM_CONF") and not mech.sys.exists("/etc/slurm/slurm.conf") then
    fail("neither SLURM_CONF nor /etc/slurm/slurm.conf is set: SLURM's commands would find no cluster")
  end
  local abs = dir:sub(1, 1) == "/" and dir or (os.getenv("PWD") or ".") .. "/" .. dir
  local sdir = abs .. "/slurm"
  mech.sys.mkdir(sdir)
  local exe = mech.sys.executable()
  local throttle = opts.max_parallel or 64
  local limit = time_limit(dir, ids, opts)
  local lines = {
    "#!/bin/bash",
    "#SBATCH --job-name=mechlab-sweep",
    string.format("#SBATCH --array=0-%d%%%d", #ids - 1, throttle),
    "#SBATCH --cpus-per-task=1",
    "#SBATCH --time=" .. hms(limit),
    "#SBATCH --requeue",
    -- two minutes before the limit the batch shell gets USR1: the run saves and the task requeues
    "#SBATCH --signal=B:USR1@120",
    "#SBATCH --output=" .. sdir .. "/%A_%a.out",
  }
  if opts.partition then lines[#lines + 1] = "#SBATCH --partition=" .. opts.partition end
  if opts.account then lines[#lines + 1] = "#SBATCH --account=" .. opts.account end
  local quoted, store = {}, require "mech.sweep.store"
  for i, id in ipairs(ids) do quoted[i] = q(store.run_dir(dir, id):match("[^/]*$")) end -- checked ids only
  local exec_args = {}
  def = def and { file = def.file, profile = def.profile, hash = def.hash } or {}
  if def.file and def.file:sub(1, 1) ~= "/" then def.file = (os.getenv("PWD") or ".") .. "/" .. def.file end
  for i, a in ipairs(require("mech.sweep.workers").exec_args(def)) do exec_args[i] = q(a) end
  exec_args = #exec_args > 0 and (" " .. table.concat(exec_args, " ")) or ""
  for _, l in ipairs {
    "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1",
    "ids=(" .. table.concat(quoted, " ") .. ")",
    "id=${ids[$SLURM_ARRAY_TASK_ID]}",
    -- never train or log under an empty id (runs/log.txt)
    "if [ -z \"$id\" ]; then echo \"task $SLURM_ARRAY_TASK_ID of a ${#ids[@]}-task array has no run\" >&2; exit 1; fi",
    -- the run is a child, so that this shell can hear SLURM's USR1 and pass it on as SIGTERM; it
    -- appends its output to its log.txt itself (--log), never through a symlink
    string.format("%s sweep exec %s \"$id\"%s --log &", q(exe), q(abs), exec_args),
    "run=$!",
    "requeue=0",
    "trap 'requeue=1; kill -TERM $run' USR1",
    "trap 'kill -TERM $run' TERM INT",
    "wait $run; status=$?",
    "while kill -0 $run 2>/dev/null; do wait $run; status=$?; done",
    -- interrupted by the time limit: back into the queue, to resume from the checkpoint
    "if [ $requeue = 1 ] && { [ $status = 143 ] || [ $status = 130 ]; }; then",
    "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"",
    "fi",
    "# 75: the run is being trained elsewhere; nothing went wrong here",
    "[ $status = 75 ] && exit 0",
    "exit $status",
  } do lines[#lines + 1] = l end
  local script = new_script(sdir)
  mech.sys.write_atomic(script, table.concat(lines, "\n") .. "\n")
  local out, ok = sh("sbatch --parsable " .. q(script))
  local array = out:match("^(%d+)")
  if not ok or not array then fail("sbatch refused the array: " .. out) end
  local agg_cmd = string.format("%s sweep aggregate %s", q(exe), q(abs))
  local out2, ok2 = sh(string.format("sbatch --parsable --job-name=mechlab-aggregate --cpus-per-task=1 "
    .. "--dependency=afterany:%s --output=%s --wrap=%s", array, q(sdir .. "/aggregate.out"), q(agg_cmd)))
  local agg = out2:match("^(%d+)")
  if not ok2 or not agg then fail("sbatch refused the aggregation job: " .. out2) end
  print(string.format("sweep %s (slurm): array job %s (%s, at most %d at once, time limit %s), aggregation job %s",
    name, array, plural(#ids, "task"), throttle, hms(limit), agg))
  return { array_job = array, aggregate_job = agg, script = script, tasks = #ids }
end

--- Whether any of the given jobs is still queued or running.
function slurm.active(jobs)
  local list = table.concat(jobs, ",")
  local out = sh("squeue -h -o %i -j " .. list)
  return out:match("%d") ~= nil
end

return slurm
