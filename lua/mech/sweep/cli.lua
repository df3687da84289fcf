--- The command line, `mechlab sweep run|status|aggregate|exec|list ...`, parsed by lua-argparse
--- (Debian's lua-argparse): usage, `--help` for each command, did-you-mean for a mistyped option.
local argparse = require "argparse"
local sweep = require "mech.sweep"
local store = require "mech.sweep.store"
local exec = require "mech.sweep.exec"

local cli = {}

local function count(what)
  return function(text)
    local n = math.tointeger(tonumber(text))
    if not n or n < 0 then return nil, string.format("%s expects a whole number, got '%s'", what, text) end
    return n
  end
end

local function parser()
  local p = argparse("mechlab sweep", "Sweeps: a grid of training runs from one Lua file, resumable, on every "
    .. "core or on a SLURM cluster (docs/sweeps.md, docs/slurm.md).")
  p:command_target("command")
  p:help_max_width(100)
  local run = p:command("run", "Train every run of a sweep file that is not done yet (finished runs are skipped, "
    .. "interrupted ones resume from their checkpoints).")
  run:argument("file", "The sweep file (here, else in mechlab's home).")
  run:option("--profile", "The definition's profile (quick, paper, smoke, ...).")
  run:option("--dir", "The sweep directory (default results/<name>-<profile>).")
  run:option("--executor", "Where the runs train."):choices { "local", "slurm", "print" }
  run:option("--jobs", "Local worker processes (default: the number of cores)."):convert(count("--jobs"))
  run:flag("--force", "Adopt a directory that holds another definition of the sweep.")
  run:flag("--retry", "Train failed runs again.")
  run:option("--only", "Train only the runs whose id contains this text; repeat it for more, "
    .. "the first's runs first."):count("*")
  run:option("--max-parallel", "SLURM: at most this many tasks at once (default 64)."):convert(count("--max-parallel"))
  run:option("--partition", "SLURM: the partition.")
  run:option("--account", "SLURM: the account.")
  p:command("status", "The state of every run, from the run directories."):argument("dir", "The sweep directory.")
  p:command("aggregate", "Write results.csv, curves.csv and summary.txt."):argument("dir", "The sweep directory.")
  local ex = p:command("exec", "Train one run (what every executor runs).")
  ex:argument("dir", "The sweep directory.")
  ex:argument("run_id", "The run's id."):args("?")
  ex:option("--list", "A file of run ids, one per line, instead of RUN_ID.")
  ex:option("--index", "With --list: the line to take, 0-based."):convert(count("--index"))
  ex:option("--file", "The sweep file: the run is taken from it, and the directory must hold its runs.")
  ex:option("--profile", "With --file: the definition's profile.")
  ex:option("--hash", "The definition's hash that sweep.json must record (what `sweep run` passes for a table).")
  ex:flag("--log", "Append this process's output to the run's log.txt (never through a symlink).")
  local list = p:command("list", "The runs of a sweep file, without training.")
  list:argument("file", "The sweep file.")
  list:option("--profile", "The definition's profile.")
  return p
end

local function nth_line(path, n)
  local text = mech.sys.read_file(path, 64 << 20)
  if not text then error("mechlab sweep exec: cannot read " .. path, 0) end
  local i = 0
  for line in text:gmatch("([^\n]*)\n?") do
    if i == n then return (line:gsub("\r$", "")) end
    i = i + 1
  end
  error(string.format("mechlab sweep exec: %s has %d lines; no index %d", path, i, n), 0)
end

local commands = {}

-- A usage error: the message and where the help is, on stderr, exit status 1 (no traceback).
local function usage_error(msg, command)
  io.stderr:write(string.format("mechlab sweep: %s\nRun 'mechlab sweep%s --help' for the usage.\n", msg,
    commands[command] and (" " .. command) or ""))
  os.exit(1)
end

function commands.run(a)
  local res = sweep.run(a.file, { profile = a.profile, dir = a.dir, executor = a.executor, jobs = a.jobs,
    force = a.force or nil, retry = a.retry or nil, max_parallel = a.max_parallel, partition = a.partition,
    account = a.account, only = a.only and #a.only > 0 and a.only or nil })
  if res.signal then os.exit(exec.exit_codes[res.signal] or 130) end
  if res.counts and res.counts.failed > 0 then os.exit(1) end
  if res.array_job then
    print(string.format("submitted array job %s and aggregation job %s", res.array_job, tostring(res.aggregate_job)))
  end
end

function commands.status(a)
  local st = sweep.status(a.dir)
  print(string.format("sweep %s (profile %s): %s", store.escape(st.name), store.escape(st.profile or "default"),
    store.counts_line(st.counts, st.total)))
  for _, r in ipairs(st.runs) do
    if r.state ~= "done" and r.state ~= "pending" then
      local m = r.manifest
      print(string.format("  %-11s %s%s", r.state, r.id, m and math.type(m.step) == "integer" and
        string.format("  (step %d/%s)", m.step, store.escape(r.steps)) or "")
        .. (r.state == "failed" and m and m.error and ("  " .. store.escape(m.error)) or ""))
    end
  end
end

function commands.aggregate(a)
  local n = sweep.aggregate(a.dir)
  print(string.format("%s: %d result rows; results.csv, curves.csv, summary.txt", a.dir, n))
  io.write(mech.sys.read_file(a.dir .. "/summary.txt", 256 << 20) or "")
end

function commands.exec(a)
  local id = a.run_id
  if a.list then id = nth_line(a.list, a.index or usage_error("--list needs --index", "exec")) end
  if not id then usage_error("expected DIR RUN_ID or DIR --list FILE --index N", "exec") end
  os.exit(sweep.exec(a.dir, id, { file = a.file, profile = a.profile, hash = a.hash, log = a.log or nil }))
end

function commands.list(a)
  local s = sweep.load(a.file, a.profile)
  for _, r in ipairs(s.runs) do print(r.id, r.steps .. " steps") end
  print(string.format("%d runs", #s.runs))
end

function cli.main(...)
  local ok, a = parser():pparse { ... }
  if not ok then usage_error(a, (...)) end
  commands[a.command](a)
end

return cli
