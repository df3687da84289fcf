--- The local executor: worker processes on this machine (`mechlab sweep exec DIR ID`, one thread
--- each), a progress line, and SIGINT/SIGTERM passed on so that every worker checkpoints.
local util = require "mech.util"
local store = require "mech.sweep.store"

local workers = {}

-- The arguments after `sweep exec DIR ID` that make a worker take its run from the definition:
-- the file and profile where the sweep came from a file, and always the definition's hash.
function workers.exec_args(def)
  local args = {}
  if def and def.file then
    args[#args + 1], args[#args + 2] = "--file", def.file
    if def.profile then args[#args + 1], args[#args + 2] = "--profile", def.profile end
  end
  if def and def.hash then args[#args + 1], args[#args + 2] = "--hash", def.hash end
  return args
end

-- The local executor: `jobs` worker processes (`mechlab sweep exec DIR ID`, one thread each).
-- def: {file, profile, hash} of the definition (workers.exec_args).
function workers.run(dir, todo, opts, def)
  local exe = mech.sys.executable()
  local jobs = opts.jobs or mech.sys.cores()
  local queue, running, n_running, mine = {}, {}, 0, {} -- mine: the ids of this process's running workers
  for i = #todo, 1, -1 do queue[#queue + 1] = todo[i] end -- a stack, popped in sweep order
  local st = store.status(dir)
  -- steps: a run's length; from: the step it stood at when this process started (a resuming
  -- run's checkpoint; 0 for a run trained anew)
  local steps_of, from, todo_ids = {}, {}, {}
  for _, r in ipairs(todo) do todo_ids[r.id] = true end
  local function step_now(r)
    return r.state == "done" and r.steps or (r.manifest and r.manifest.step or 0)
  end
  for _, r in ipairs(st.runs) do
    steps_of[r.id] = r.steps
    from[r.id] = todo_ids[r.id] and (r.manifest and r.manifest.status ~= "done" and r.manifest.step or 0) or step_now(r)
  end
  local t0, steps_done = mech.sys.time(), 0
  local tty = mech.sys.isatty(1)
  local last_print, last_scan, failed_ids, signal, stopping = 0, t0, {}, nil, false

  -- The progress line reads the directory, not this process's bookkeeping, since several `sweep
  -- run`s may share one: counts, and steps/s and ETA over every run's steps since this process
  -- started (manifests are updated at each checkpoint). A scan reads every manifest, so it is
  -- done at most every 10 s, or when a run of this process ends.
  local function show(force)
    local now = mech.sys.time()
    if not force and now - last_print < (tty and 1 or 30) then return end
    last_print = now
    if force or now - last_scan >= 10 then st, last_scan = store.status(dir), now end
    local counts, trained, remaining = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }, 0, 0
    for _, r in ipairs(st.runs) do
      local at, state = step_now(r), r.state
      if mine[r.id] and state ~= "done" and state ~= "failed" then state = "running" end -- before its worker locks it
      counts[state] = counts[state] + 1
      trained = trained + math.max(0, at - from[r.id])
      if state ~= "done" and state ~= "failed" then remaining = remaining + r.steps - at end
    end
    st.counts = counts
    local rate = trained / math.max(now - t0, 1e-9)
    local line = string.format("sweep %s: %s  %s steps/s  ETA %s", st.name, store.counts_line(counts, st.total),
      trained > 0 and string.format("%.1f", rate) or "--", trained > 0 and util.clock(remaining / rate) or "--:--")
    if tty then io.write("\r\27[K" .. line); io.flush() else print(line) end
  end

  mech.sys.catch_signals()
  while (#queue > 0 and not signal) or n_running > 0 do
    signal = signal or mech.sys.interrupted()
    if signal and not stopping then -- the workers checkpoint and stop (a terminal's Ctrl-C reached them too)
      stopping = true
      for pid in pairs(running) do mech.sys.kill(pid, signal) end
    end
    while not signal and n_running < jobs and #queue > 0 do
      local r = table.remove(queue)
      local rdir = store.make_run_dir(dir, r.id, "run")
      local argv = { exe, "sweep", "exec", dir, r.id }
      table.move(workers.exec_args(def), 1, #workers.exec_args(def), #argv + 1, argv)
      local pid = mech.sys.spawn(argv, rdir .. "/log.txt")
      running[pid], mine[r.id] = r, true
      n_running = n_running + 1
    end
    local pid, code, sig = mech.sys.wait(-1, false)
    if pid and running[pid] then
      local r = running[pid]
      running[pid], mine[r.id] = nil, nil
      n_running = n_running - 1
      if code == 0 then
        steps_done = steps_done + steps_of[r.id] - from[r.id]
      elseif code ~= 75 and code ~= 130 and code ~= 143 then -- 75: claimed by another process; else interrupted
        local m = store.read_manifest(dir, r.id)
        failed_ids[#failed_ids + 1] = { id = r.id, error = m and m.error or
          (sig and ("killed by " .. tostring(sig)) or ("exit status " .. tostring(code))) }
      end
      show(tty)
    elseif not pid then
      mech.sys.sleep(0.05)
    end
    show(false)
  end
  mech.sys.release_signals()
  show(true)
  if tty then io.write("\n") end
  for _, f in ipairs(failed_ids) do print("failed: " .. f.id .. ": " .. store.escape(f.error)) end
  return { counts = st.counts, failed = failed_ids, signal = signal, wall = mech.sys.time() - t0, steps = steps_done }
end

function workers.print_commands(dir, todo, def)
  local exe = mech.sys.executable()
  local extra = {}
  for i, a in ipairs(workers.exec_args(def)) do extra[i] = util.shell_quote(a) end
  extra = #extra > 0 and (" " .. table.concat(extra, " ")) or ""
  for _, r in ipairs(todo) do
    print(string.format("%s sweep exec %s %s%s", util.shell_quote(exe), util.shell_quote(dir), util.shell_quote(r.id),
      extra))
  end
  return { printed = #todo }
end

return workers
