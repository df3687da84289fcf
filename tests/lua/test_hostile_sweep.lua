-- Hostile sweep directories (issue 41): a sweep directory is data. Each case plants what an
-- archive from someone else could hold (symlinks, FIFOs, devices, edited ids and run lists, a
-- module to run) and asserts the absence of effects: no file outside the test's directory
-- created or changed, the symlink's target unchanged, no marker written by a module, no hang.
local T = require "check"
local sweep = require "mech.sweep"

local function real(path)
  local p = io.popen("readlink -f '" .. path .. "'")
  local r = p:read("l")
  p:close()
  return r
end
local exe = real(arg[-1])
local root = os.tmpname()
os.remove(root)
mech.sys.mkdir(root)
root = real(root)
local outside = root .. "/outside" -- the victim's files: nothing may touch them
mech.sys.mkdir(outside)

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local t = f:read("a")
  f:close()
  return t
end
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- Every file and link under a directory with its content (links as their target): the state
-- that must not change.
local function snapshot(dir)
  local out = sh("cd " .. q(dir) .. " && find . \\( -type f -o -type l \\) -printf '%p %l\\n' | sort")
  local state = { out }
  for line in out:gmatch("[^\n]+") do
    local p = line:match("^(%S+) $")
    if p then state[#state + 1] = p .. "=" .. tostring(read(dir .. "/" .. p)) end
  end
  return table.concat(state, "\n")
end

-- A victim file outside DIR, and a check that it and everything else outside stayed as they were.
local n_victims = 0
local function victim()
  n_victims = n_victims + 1
  local path = outside .. "/victim" .. n_victims
  write(path, "precious " .. n_victims .. "\n")
  return path
end
local t_start = mech.sys.time()
local function untouched(before, what)
  T.eq(snapshot(outside), before, "files outside DIR changed (" .. what .. ")")
end

-- A tiny sweep: one run of 2 steps, as a file (the definition the user names).
local n_dirs = 0
local function new_sweep(over)
  n_dirs = n_dirs + 1
  local dir, file = root .. "/sweep" .. n_dirs, root .. "/def" .. n_dirs .. ".lua"
  write(file, string.format([[
return { name = "h",
  base = { task = "ar_32", model = { n_layers = 1, d_model = 8 }, train_docs = 32, eval_docs = 16, batch_size = 16,
    steps = 2, eval_every = 2, seed = 1 },
  grid = { lr = { 1e-3 }, arch = { "attention" }%s } }
]], over or ""))
  sweep.run(file, { dir = dir, executor = "print" }) -- sweep.json only
  return dir, file, sweep.load(file).runs[1].id
end

local json = require "mech.json"
local function edit_sweep_json(dir, fn)
  local s = json.decode(read(dir .. "/sweep.json"))
  fn(s)
  write(dir .. "/sweep.json", json.encode(s, " "))
end

-- A manifest saying the run stopped at step 1 (interrupted: status probes its lock).
local function interrupted_manifest(rdir)
  mech.sys.mkdir(rdir)
  write(rdir .. "/manifest.json", '{"status": "running", "step": 1}')
end

T.test("status and aggregate write nothing through a lock symlink and create no lock", function()
  local dir, _, id = new_sweep()
  local rdir = dir .. "/runs/" .. id
  interrupted_manifest(rdir)
  local v = victim()
  os.execute("ln -s " .. q(v) .. " " .. q(rdir .. "/lock"))
  local before = snapshot(outside)
  pcall(sweep.status, dir)
  pcall(sweep.aggregate, dir)
  untouched(before, "lock symlink")
  -- a run directory without a lock gets none from status
  os.remove(rdir .. "/lock")
  local st = sweep.status(dir)
  T.eq(st.runs[1].state, "interrupted")
  T.falsy(mech.sys.exists(rdir .. "/lock"), "status created a lock file")
end)

T.test("aggregate writes only results.csv, curves.csv and summary.txt in DIR", function()
  local dir, _, id = new_sweep()
  local rdir = dir .. "/runs/" .. id
  mech.sys.mkdir(rdir)
  write(rdir .. "/manifest.json", '{"status": "done", "step": 2}')
  write(rdir .. "/metrics.csv", "step,split,metric,value\n2,test,accuracy,0.5\n")
  local function listing() return sh("cd " .. q(dir) .. " && find . | sort") end
  local before = listing()
  sweep.aggregate(dir)
  local after = listing()
  local added = {}
  for line in after:gmatch("[^\n]+") do
    if not before:find(line .. "\n", 1, true) then added[#added + 1] = line end
  end
  table.sort(added)
  T.eq(added, { "./curves.csv", "./results.csv", "./summary.txt" })
end)

T.test("aggregate's outputs: symlinks and planted temporary names are replaced, never followed", function()
  local dir = new_sweep()
  local links = {}
  for _, name in ipairs { "results.csv", "curves.csv", "summary.txt", "results.csv.tmp." .. mech.sys.getpid(),
    "curves.csv.tmp." .. mech.sys.getpid() } do
    links[name] = victim()
    os.execute("ln -s " .. q(links[name]) .. " " .. q(dir .. "/" .. name))
  end
  local before = snapshot(outside)
  pcall(sweep.aggregate, dir)
  untouched(before, "aggregate outputs")
end)

T.test("a worker writes nothing through symlinks: lock, manifest, metrics, log, checkpoints, rows.cache", function()
  local dir, file, id = new_sweep()
  local rdir = dir .. "/runs/" .. id
  mech.sys.mkdir(rdir)
  for _, name in ipairs { "metrics.csv", "log.txt", "lock", "manifest.json", "checkpoint.safetensors",
    "checkpoint-report.safetensors", "rows.cache" } do
    local v = victim()
    if name == "metrics.csv" then write(v, "step,split,metric,value\n") end -- a header it could append to
    os.execute("ln -s " .. q(v) .. " " .. q(rdir .. "/" .. name))
  end
  local before = snapshot(outside)
  sh(string.format("%s sweep run %s --dir %s --jobs 1", q(exe), q(file), q(dir)))
  sh(string.format("%s sweep exec %s %s --file %s --log", q(exe), q(dir), q(id), q(file)))
  untouched(before, "run directory symlinks")
end)

T.test("a run directory or runs/ that is a symlink out of DIR is refused", function()
  local dir, file, id = new_sweep()
  local away = outside .. "/elsewhere"
  mech.sys.mkdir(away)
  os.execute("ln -s " .. q(away) .. " " .. q(dir .. "/runs/" .. id))
  local before = snapshot(outside)
  sh(string.format("%s sweep run %s --dir %s --jobs 1", q(exe), q(file), q(dir)))
  pcall(sweep.status, dir)
  pcall(sweep.aggregate, dir)
  untouched(before, "run directory symlink")
end)

T.test("'..' in a run id of sweep.json: status, aggregate, exec and run refuse; nothing outside DIR", function()
  local dir, file, id = new_sweep()
  local escaped = "../../outside/escaped-0123abcd"
  edit_sweep_json(dir, function(s) s.runs[1].id = escaped end)
  -- the escaped run has a finished record there: aggregate would read it and write rows.cache
  local target = dir .. "/runs/" .. escaped
  mech.sys.mkdir(target)
  write(target .. "/manifest.json", '{"status": "done", "step": 2}')
  write(target .. "/metrics.csv", "step,split,metric,value\n2,test,accuracy,0.5\n")
  local before = snapshot(outside)
  local ok1, e1 = pcall(sweep.status, dir)
  local ok2 = pcall(sweep.aggregate, dir)
  local ok3 = pcall(sweep.exec, dir, escaped)
  local out = sh(string.format("%s sweep run %s --dir %s --jobs 1", q(exe), q(file), q(dir)))
  local out2 = sh(string.format("%s sweep exec %s %s", q(exe), q(dir), q(escaped)))
  untouched(before, "'..' id")
  T.falsy(ok1 or ok2 or ok3, "a '..' id was accepted")
  T.truthy(tostring(e1):find("not a run id", 1, true), e1)
  T.truthy(out:find("sweep.json", 1, true) and out2:find("run id", 1, true), out .. out2)
  T.falsy(mech.sys.exists(root .. "/escaped-0123abcd"))
  -- the path fields: a config's `out` and the record's `file` are never used
  local dir2, file2, id2 = new_sweep()
  edit_sweep_json(dir2, function(s)
    s.file = outside .. "/evil.lua"
    s.runs[1].config.out = outside .. "/trained_here"
  end)
  write(outside .. "/evil.lua", "io.open('" .. outside .. "/marker', 'w'):close() return {}")
  before = snapshot(outside)
  sh(string.format("%s sweep run %s --dir %s --jobs 1", q(exe), q(file2), q(dir2)))
  sh(string.format("%s sweep exec %s %s", q(exe), q(dir2), q(id2)))
  untouched(before, "path fields")
  T.falsy(mech.sys.exists(outside .. "/trained_here"))
end)

-- A definition hash recomputed as an attacker would (FNV-1a is public).
local function rehash(s)
  s.definition_hash = sweep.hash(json.encode { s.name, s.profile or false, s.runs, s.evaluators })
end

T.test("an edited run list is refused by `sweep run` and its workers, even with its hash recomputed", function()
  local dir, file, id = new_sweep()
  edit_sweep_json(dir, function(s)
    s.runs[1].config.steps = 7
    rehash(s)
  end)
  local out = sh(string.format("%s sweep run %s --dir %s --jobs 1", q(exe), q(file), q(dir)))
  T.truthy(out:find("another definition", 1, true), out)
  local out2 = sh(string.format("%s sweep exec %s %s --file %s", q(exe), q(dir), q(id), q(file)))
  T.truthy(out2:find("does not hold the runs of", 1, true), out2)
  T.falsy(mech.sys.exists(dir .. "/runs/" .. id .. "/metrics.csv"), "the edited run was trained")
  -- an edit that keeps the old hash: the worker sees it
  local dir2, _, id2 = new_sweep()
  edit_sweep_json(dir2, function(s) s.runs[1].config.steps = 7 end)
  local out3 = sh(string.format("%s sweep exec %s %s", q(exe), q(dir2), q(id2)))
  T.truthy(out3:find("was changed after", 1, true), out3)
  T.falsy(mech.sys.exists(dir2 .. "/runs/" .. id2 .. "/metrics.csv"), "the edited run was trained")
end)

T.test("config.task = {module = ...} in sweep.json runs no module", function()
  local dir, file, id = new_sweep()
  local cwd = root .. "/cwd"
  mech.sys.mkdir(cwd)
  write(cwd .. "/evilmod.lua", string.format("io.open(%q, 'w'):close() return { x = function() error('no') end }",
    outside .. "/module_ran"))
  edit_sweep_json(dir, function(s)
    s.runs[1].config.task = { kind = "lua", module = "evilmod", name = "x", options = {} }
    rehash(s)
  end)
  local before = snapshot(outside)
  local o1 = sh(string.format("cd %s && %s sweep run %s --dir %s --jobs 1", q(cwd), q(exe), q(file), q(dir)))
  local o2 = sh(string.format("cd %s && %s sweep exec %s %s", q(cwd), q(exe), q(dir), q(id)))
  untouched(before, "task module")
  T.falsy(mech.sys.exists(outside .. "/module_ran"), "a module named by sweep.json ran")
  T.truthy(o2:find("names the Lua module", 1, true), o1 .. o2)
end)

-- Runs a Lua snippet in a child process with a time limit: whether it ended in time, its output.
local function child(code, seconds)
  local out, status = sh(string.format("timeout %d %s -e %s", seconds or 10, q(exe), q(code)))
  return status ~= 124, out
end

T.test("FIFOs and devices are never read: manifest, metrics, rows.cache, sweep.json, results.csv, lock", function()
  local dir, _, id = new_sweep()
  local rdir = dir .. "/runs/" .. id
  mech.sys.mkdir(rdir)
  local cases = {
    { rdir .. "/manifest.json", "fifo", "require('mech.sweep').status(%q)" },
    { rdir .. "/manifest.json", "/dev/zero", "require('mech.sweep').status(%q)" },
    { rdir .. "/lock", "fifo", "require('mech.sweep').status(%q)" },
    { rdir .. "/metrics.csv", "fifo", "require('mech.sweep').aggregate(%q)" },
    { rdir .. "/metrics.csv", "/dev/zero", "require('mech.sweep').aggregate(%q)" },
    { rdir .. "/rows.cache", "/dev/zero", "require('mech.sweep').aggregate(%q)" },
    { dir .. "/sweep.json", "fifo", "require('mech.sweep').status(%q)" },
    { dir .. "/results.csv", "fifo", "require('mech.sweep').results(%q)" },
  }
  local saved = read(dir .. "/sweep.json")
  for _, c in ipairs(cases) do
    local path, kind, code = c[1], c[2], c[3]
    if path:find("rows.cache", 1, true) then write(rdir .. "/manifest.json", '{"status": "done", "step": 2}') end
    os.remove(path)
    if kind == "fifo" then os.execute("mkfifo " .. q(path)) else os.execute("ln -s " .. kind .. " " .. q(path)) end
    local t0 = mech.sys.time()
    local ended, out = child(string.format(code, dir), 5)
    T.truthy(ended and mech.sys.time() - t0 < 5, path .. " (" .. kind .. ") hung: " .. out)
    os.remove(path)
    os.remove(rdir .. "/manifest.json")
    if path == dir .. "/sweep.json" then write(path, saved) end
  end
end)

T.test("ids of 100 characters and more aggregate; a failed aggregate leaves no temporary file", function()
  local dir, _, id = new_sweep(", schedule = { 'cosine' }, warmup = { 0.1 }, weight_decay = { 0 }, beta1 = { 0.9 }, "
    .. "beta2 = { 0.999 }, eval_batch = { 64 }")
  T.truthy(#id >= 100, id)
  T.eq(sweep.aggregate(dir), 0)
  T.truthy(read(dir .. "/summary.txt"):find(id, 1, true))
  -- a run whose record is broken makes aggregate fail half-way
  edit_sweep_json(dir, function(s) s.runs[1].config = { broken = true } end)
  T.falsy(pcall(sweep.aggregate, dir))
  local files = sh("ls -a " .. q(dir))
  T.falsy(files:find(".tmp.", 1, true), "temporary files left: " .. files)
end)

T.test("names from files are escaped on the terminal: a newline in a run's error", function()
  local dir, _, id = new_sweep()
  local rdir = dir .. "/runs/" .. id
  mech.sys.mkdir(rdir)
  write(rdir .. "/manifest.json", json.encode { status = "failed", error = "boom\nFAKE LINE\27[2J" })
  local out = sh(string.format("%s sweep status %s", q(exe), q(dir)))
  T.falsy(out:find("\nFAKE LINE", 1, true) or out:find("\27", 1, true), out)
end)

T.test("plots/attribution_map.lua refuses a layer index beyond the data", function()
  local path = root .. "/attr.csv"
  write(path, "step,split,metric,value\n10,test,300000000.KEY.query_item_orig.query_item.block_input.attrib,0.5\n"
    .. "10,test,0.KEY.query_item_orig.query_item.block_input.attrib,0.5\n")
  local t0 = mech.sys.time()
  local out, status = sh(string.format("timeout 10 %s plots/attribution_map.lua %s %s", q(exe), q(root .. "/attr.png"),
    q(path)))
  local ended = status ~= 124
  T.truthy(ended and mech.sys.time() - t0 < 10, "it ran past 10 s: " .. out)
  T.truthy(out:find("layer", 1, true), out)
end)

print(string.format("%.1f s", mech.sys.time() - t_start))
os.execute("rm -rf " .. q(root))
T.done()
