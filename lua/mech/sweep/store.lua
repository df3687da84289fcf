--- A sweep directory: DIR/sweep.json (the expansion) and DIR/runs/<id>/ (each run's train.run
--- directory); the state of every run read from the directories alone, so that several processes
--- (and a cluster's nodes) can share one.
local util = require "mech.util"
local json = require "mech.json"
local definition = require "mech.sweep.definition"

local store = {}

-- A file of the sweep directory as text: nil when it cannot be opened (missing); an error when it
-- is there but refused (a FIFO, a device, larger than max).
local function read_file(path, max)
  local text, err, refused = mech.sys.read_file(path, max)
  if refused then error("sweep: " .. store.escape(err), 0) end
  return text
end
store.read_data = read_file

local fail = util.failer("sweep.")

-- Bounds of the files a sweep reads whole (a larger one is refused, not read).
store.max_sweep_json = 256 << 20
store.max_manifest = 16 << 20

--- A name from a file as it may reach a terminal or a log: control characters (a newline, an
--- escape sequence) and backslashes written as \ddd, long names cut.
function store.escape(v)
  local t = tostring(v)
  if #t > 300 then t = t:sub(1, 300) .. "..." end
  return (t:gsub("[%c\\\127]", function(c) return string.format("\\%03d", c:byte()) end))
end

--- Whether id is a run id in the canonical form definition.expand makes: the slug's characters
--- [A-Za-z0-9.-_=] and a dash and 8 hex digits at the end; no "/", no "..", no control
--- character, at most 240 bytes (a directory name).
function store.valid_id(id)
  return type(id) == "string" and #id <= 240 and id:match("^[%w%.%-_=]*%-%x%x%x%x%x%x%x%x$") ~= nil
    and not id:find("..", 1, true)
end

function store.check_id(id, fn, where)
  if not store.valid_id(id) then
    fail(fn, string.format("%s holds the run id '%s', which is not a run id (letters, digits, . - _ = and a dash "
      .. "and 8 hex digits at the end; no '/' or '..'): the file was edited or damaged; write it again with "
      .. "`mechlab sweep run FILE --dir DIR --force`", where, store.escape(id)), 4)
  end
  return id
end

-- The hash a sweep.json records: of the sweep's name, profile, runs and evaluators.
function store.definition_hash(s)
  return definition.hash(json.encode { s.name, s.profile or false, s.runs, s.evaluators })
end

--- DIR/sweep.json, read as data: a regular file within store.max_sweep_json, every run id
--- canonical.
function store.read(dir, fn)
  local path = dir .. "/sweep.json"
  local text = read_file(path, store.max_sweep_json)
  if not text then fail(fn, "'" .. dir .. "' is not a sweep directory (no sweep.json)", 4) end
  local s = json.decode(text, path)
  if type(s) ~= "table" or type(s.runs) ~= "table" then fail(fn, path .. " holds no list of runs", 4) end
  for _, r in ipairs(s.runs) do
    if type(r) ~= "table" then fail(fn, path .. " holds a run that is not an object", 4) end
    store.check_id(r.id, fn, path)
    if type(r.config) ~= "table" or type(r.axes) ~= "table" then
      fail(fn, path .. ": run " .. r.id .. " has no config or axes", 4)
    end
  end
  return s
end

-- The real path of dir and whether path (existing) lies in it; nil when path does not exist.
local function real_inside(dir, path)
  local root = mech.sys.realpath(dir)
  local real = mech.sys.realpath(path)
  if not root or not real then return nil end
  return real == root or real:sub(1, #root + 1) == root .. "/", real, root
end

--- Fails unless path, where it exists, lies under DIR once symlinks are resolved (a run
--- directory or runs/ that is a symlink out of DIR is refused).
function store.check_inside(dir, path, fn)
  local inside, real = real_inside(dir, path)
  if inside == false then
    fail(fn, string.format("'%s' leads out of the sweep directory %s (to %s); refusing to read or write there",
      store.escape(path), store.escape(dir), store.escape(real)), 4)
  end
  return path
end

-- The stored sweep.json against a fresh expansion: nil when they agree, else what differs.
local function difference(o, s, hash)
  if o.definition_hash ~= hash then
    return string.format("its definition hash is %s, the definition's is %s", store.escape(o.definition_hash), hash)
  end
  if #o.runs ~= #s.runs then
    return string.format("it lists %d runs, the definition %d", #o.runs, #s.runs)
  end
  for i, r in ipairs(s.runs) do
    local stored = o.runs[i]
    if stored.id ~= r.id then
      return string.format("its run %d is '%s', the definition's is '%s'", i, store.escape(stored.id), r.id)
    end
    -- through JSON both, so that numbers compare as the file writes them
    local a, b = json.encode(stored.config), json.encode(json.decode(json.encode(r.config)))
    if a ~= b then return string.format("the config of its run %s differs from the definition's", r.id) end
  end
  if o.name ~= s.name or (o.profile or false) ~= (s.profile or false) then
    return "its name or profile differs from the definition's"
  end
  return nil
end

--- Checks DIR/sweep.json against a fresh expansion of the definition (the runs the user's file
--- gives): the recorded hash and every id and config must be the definition's. Returns the
--- stored record, or nil and what differs.
function store.verify(dir, s, fn)
  local o = store.read(dir, fn)
  local diff = difference(o, s, store.definition_hash(s))
  if diff then return nil, diff end
  return o
end

--- The sweep record a worker (`sweep exec` without the definition file) reads: sweep.json, its
--- recorded hash recomputed over its content and, given one, equal to the hash the spawning
--- `sweep run` computed from the definition.
function store.read_checked(dir, fn, want_hash)
  local o = store.read(dir, fn)
  local hash = store.definition_hash(o)
  if hash ~= o.definition_hash or (want_hash and hash ~= want_hash) then
    fail(fn, string.format("%s/sweep.json was changed after `sweep run` wrote it (its runs hash to %s, it records "
      .. "%s%s); run `mechlab sweep run FILE --dir %s` with the definition file again (--force writes sweep.json "
      .. "anew from it)", store.escape(dir), hash, store.escape(o.definition_hash),
      want_hash and (", the definition's is " .. want_hash) or "", store.escape(dir)), 4)
  end
  return o
end

-- Writes DIR/sweep.json for a loaded sweep, or checks that the one there is the same sweep: the
-- runs come from the definition, never from the directory.
function store.prepare(s, dir, file, force)
  mech.sys.mkdir(dir .. "/runs")
  store.check_inside(dir, dir .. "/runs", "run")
  local record = { name = s.name, profile = s.profile, file = file, axes = s.axes, evaluators = s.evaluators,
    select = s.select, runs = s.runs }
  local hash = store.definition_hash(s)
  record.definition_hash = hash
  local old = read_file(dir .. "/sweep.json", store.max_sweep_json)
  if old then
    local ok, o = pcall(json.decode, old, dir .. "/sweep.json")
    if ok and type(o) == "table" and o.definition_hash == hash then
      local okv, same, diff = pcall(store.verify, dir, s, "run")
      if okv and same then
        record.created = same.created
        return record
      end
      if not force then
        fail("run", string.format("%s/sweep.json records this definition's hash but not its runs (%s): it was "
          .. "edited; --force writes it again from the definition (finished runs whose config is unchanged are "
          .. "kept)", store.escape(dir), okv and diff or tostring(same)), 4)
      end
    elseif not force then
      fail("run", string.format("%s holds sweep '%s' (profile %s) of another definition; use another --dir, or "
        .. "--force to adopt it (finished runs whose config is unchanged are kept)", store.escape(dir),
        store.escape(ok and type(o) == "table" and o.name), store.escape(ok and type(o) == "table" and o.profile)), 4)
    end
  end
  record.created = mech.sys.utc()
  mech.sys.write_atomic(dir .. "/sweep.json", json.encode(record, " ") .. "\n")
  return record
end

function store.run_dir(dir, id)
  if not store.valid_id(id) then store.check_id(id, "run", dir .. "/sweep.json") end
  return dir .. "/runs/" .. id
end

--- A run's directory, created, checked to lie under DIR (for the files a worker writes there).
function store.make_run_dir(dir, id, fn)
  local rdir = store.run_dir(dir, id)
  store.check_inside(dir, dir .. "/runs", fn)
  mech.sys.mkdir(rdir)
  return store.check_inside(dir, rdir, fn)
end

function store.read_manifest(dir, id)
  local rdir = store.run_dir(dir, id)
  store.check_inside(dir, rdir, "status")
  local text = read_file(rdir .. "/manifest.json", store.max_manifest)
  if not text then return nil end
  local ok, m = pcall(json.decode, text)
  return ok and type(m) == "table" and m or nil
end

-- A run's state from its directory alone: pending, running (locked), done, failed, interrupted
-- (checkpointed and stopped, or its process died without a word).
function store.run_state(dir, id)
-- Reads only: the lock is probed (mech.sys.lock_held), never created or written.
  local m = store.read_manifest(dir, id)
  local held = mech.sys.lock_held(store.run_dir(dir, id) .. "/lock")
  if not m then return held and "running" or "pending" end
  if m.status == "done" or m.status == "failed" then return m.status, m end
  if held then return "running", m end
  return "interrupted", m
end

--- The state of every run of the sweep in DIR, from the run directories alone:
--- {name, profile, counts = {done, running, failed, interrupted, pending}, runs = {{id, state, manifest}}}.
function store.status(dir)
  local s = store.read(dir, "status")
  if mech.sys.exists(dir .. "/runs") then store.check_inside(dir, dir .. "/runs", "status") end
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
