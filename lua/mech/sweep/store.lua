--- A sweep directory: DIR/sweep.json (the expansion) and DIR/runs/<id>/ (each run's train.run
--- directory); the state of every run read from the directories alone, so that several processes
--- (and a cluster's nodes) can share one.
local json = require "mech.json"
local definition = require "mech.sweep.definition"

local store = {}
local read_file = mech.sys.read_file -- nil when the file is missing

local function fail(fn, msg, level) error("sweep." .. fn .. ": " .. msg, level or 3) end

function store.read(dir, fn)
  local text = read_file(dir .. "/sweep.json")
  if not text then fail(fn, "'" .. dir .. "' is not a sweep directory (no sweep.json)", 4) end
  return json.decode(text, dir .. "/sweep.json")
end

-- Writes DIR/sweep.json for a loaded sweep, or checks that the one there is the same sweep.
function store.prepare(s, dir, file, force)
  mech.sys.mkdir(dir .. "/runs")
  local record = { name = s.name, profile = s.profile, file = file, axes = s.axes, evaluators = s.evaluators,
    select = s.select, runs = s.runs }
  local hash = definition.hash(json.encode { s.name, s.profile or false, s.runs, s.evaluators })
  record.definition_hash = hash
  local old = read_file(dir .. "/sweep.json")
  if old then
    local o = json.decode(old, dir .. "/sweep.json")
    if o.definition_hash == hash then return o end
    if not force then
      fail("run", string.format("%s holds sweep '%s' (profile %s) of another definition; use another --dir, or "
        .. "--force to adopt it (finished runs whose config is unchanged are kept)", dir, tostring(o.name),
        tostring(o.profile)), 4)
    end
  end
  record.created = mech.sys.utc()
  mech.sys.write_atomic(dir .. "/sweep.json", json.encode(record, " ") .. "\n")
  return record
end

function store.run_dir(dir, id) return dir .. "/runs/" .. id end

function store.read_manifest(dir, id)
  local text = read_file(store.run_dir(dir, id) .. "/manifest.json")
  if not text then return nil end
  local ok, m = pcall(json.decode, text)
  return ok and m or nil
end

-- A run's state from its directory alone: pending, running (locked), done, failed, interrupted
-- (checkpointed and stopped, or its process died without a word).
function store.run_state(dir, id)
  local m = store.read_manifest(dir, id)
  if not m then
    if mech.sys.exists(store.run_dir(dir, id) .. "/lock") then
      local lk = mech.sys.lock(store.run_dir(dir, id) .. "/lock")
      if not lk then return "running" end
      lk:release()
    end
    return "pending"
  end
  if m.status == "done" or m.status == "failed" then return m.status, m end
  local lk = mech.sys.lock(store.run_dir(dir, id) .. "/lock")
  if not lk then return "running", m end
  lk:release()
  return "interrupted", m
end

--- The state of every run of the sweep in DIR, from the run directories alone:
--- {name, profile, counts = {done, running, failed, interrupted, pending}, runs = {{id, state, manifest}}}.
function store.status(dir)
  local s = store.read(dir, "status")
  local counts = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }
  local runs = {}
  for _, r in ipairs(s.runs) do
    local state, m = store.run_state(dir, r.id)
    counts[state] = counts[state] + 1
    runs[#runs + 1] = { id = r.id, state = state, manifest = m, steps = r.steps }
  end
  return { name = s.name, profile = s.profile, counts = counts, runs = runs, total = #s.runs }
end

function store.counts_line(c, total)
  return string.format("%d/%d done, %d running, %d failed, %d interrupted, %d pending", c.done, total, c.running,
    c.failed, c.interrupted, c.pending)
end

return store
