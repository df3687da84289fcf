--- A task's record and the task a record names: what a task made outside C records (task:spec,
--- task:config, task:kind), and the reading of task records of every kind: mech.task.from_spec
--- (a built-in task, a Lua task from its trusted module, a file task) and mech.task.from_checkpoint
--- (the record train.run wrote, or what an older checkpoint or its manifest.json implies).
local C = require "mech.task_c"
local util = require "mech.util"
local trust = require "mech.trust"
local D = require "mech.task_custom.definition"
local lua_task = require "mech.task_custom.lua_task"
local jsonl = require "mech.task_custom.jsonl"

local M = {}
local fail, definition = D.fail, D.of

M.MANIFEST_BYTES = 16 * 1024 * 1024 -- the most a manifest.json read for its task may hold

--- task:spec(): {kind = "lua" | "jsonl", name, seed, module, options} (or path for a file task).
function M.spec(task)
  local d = definition(task)
  return { kind = d.kind, name = task:name(), seed = d.seed, module = d.module, path = d.path,
    options = util.copy(d.options) }
end

function M.config(task)
  local d = definition(task)
  local lo, hi = task:corrupt_range()
  return { vocab = d.V, positions = util.copy(d.positions), holdout = d.holdout, corrupt = { lo, hi }, seed = d.seed,
    module = d.module, path = d.path, options = util.copy(d.options) }
end

function M.kind(task) return definition(task).kind end

local builtin = { ar = true, atr = true, mqar = true }

--- mech.task.from_spec(spec) (its table and keys checked in C): a built-in task from its kind, seed,
--- options and name; kind "lua" from its module, options, seed; "jsonl" from its file.
function M.from_spec(spec, opts)
  local fn = "mech.task.from_spec"
  opts = opts or {}
  local modules = trust.set(opts.modules, fn)
  if opts.dir ~= nil and type(opts.dir) ~= "string" then
    fail(fn, "option 'dir': expected a directory, got " .. type(opts.dir))
  end
  local function optstr(key)
    local v = spec[key]
    if v ~= nil and type(v) ~= "string" then
      fail(fn, string.format("option '%s': expected a string, got %s", key, type(v)))
    end
    return v
  end
  local kind = optstr("kind")
  if builtin[kind] then
    local name, options, seed = optstr("name"), spec.options, spec.seed
    if options ~= nil and type(options) ~= "table" then
      fail(fn, "field 'options' expected a table, got " .. type(options))
    end
    if seed ~= nil and math.type(seed) ~= "integer" then
      fail(fn, "field 'seed' expected an integer, got " .. type(seed))
    end
    local args = {}
    for k, v in pairs(options or {}) do args[k] = v end
    args.seed = seed
    local t = C.call(mech.task[kind], args)
    if name then
      if #name > 31 then fail(fn, string.format("field 'name' expected at most 31 bytes, got %d", #name)) end
      C.set_name(t, name)
    end
    return t
  elseif kind ~= "lua" and kind ~= "jsonl" then
    fail(fn, string.format('field \'kind\' expected "ar", "atr", "mqar", "lua" or "jsonl", got %s', kind or "nothing"))
  end
  if spec.kind == "jsonl" then
    if type(spec.path) ~= "string" then fail(fn, "a jsonl task record expected its file's 'path'") end
    local jopts = util.copy(spec.options or {})
    jopts.seed, jopts.name = spec.seed, spec.name
    return jsonl.from_jsonl(spec.path, jopts, opts.dir)
  end
  if spec.module == nil then
    fail(fn, string.format("the Lua task '%s' was made without a module, so its record cannot rebuild it: define it "
      .. "in a module that returns a function of its options and make it with mech.task.load(module, options)",
      tostring(spec.name)))
  end
  return lua_task.load_recorded(fn, spec, modules)
end

-- JSON text as Lua data; a syntax error raises naming fn and what the text is.
local function decode(text, fn, what)
  local ok, v = pcall(mech.json_decode, text)
  if ok then return v end
  fail(fn, string.format("%s is not valid JSON (json: %s)", what, (tostring(v):gsub("^mech%.json_decode: ", ""))))
end

-- The training seed's text read as C's strtoull reads it: leading digits (none: 0), negated after a
-- '-', saturating at 2^64 - 1 (-1 as a Lua integer).
local function seed_of(text)
  local sign, digits = text:match("^%s*([+-]?)(%d*)")
  local n, max10 = 0, 0x1999999999999999 -- (2^64 - 1) // 10
  for c in digits:gmatch("%d") do
    local d = c:byte() - 48
    if math.ult(max10, n) or (n == max10 and d > 5) then return -1 end
    n = n * 10 + d
  end
  return sign == "-" and -n or n
end

-- The preset `name` at the training seed ("" for train.run's default 42): what train.run built from a
-- preset name. nil when name is no preset.
local function preset_at_seed(name, seed)
  for _, p in ipairs(mech.task.presets()) do
    if p == name then return (C.call(mech.task.preset, name, seed == "" and 42 or seed_of(seed))) end
  end
end

-- The task of the manifest.json beside the checkpoint `path` (an older run directory), nil for none.
-- Its options (written before task records) hold the seed; the kind shows in the keys.
local function manifest_task(path, name, fn)
  local file = (path:match("^(.*/)") or "") .. "manifest.json"
  if not mech.sys.exists(file) then return nil end
  local dir = path:match("^(.*)/") or "."
  local text, err = C.read_data("manifest.json", dir == "" and "/" or dir, M.MANIFEST_BYTES)
  if not text then fail(fn, err) end
  local m = decode(text, fn, file)
  local opts = type(m) == "table" and m.task
  if type(opts) ~= "table" then return nil end
  local kind = opts.head_position ~= nil and "atr" or opts.num_kv ~= nil and "ar" or nil
  if not kind or opts.kind ~= nil then return nil end
  local seed = opts.seed
  opts.seed = nil
  local spec = { kind = kind, seed = seed, options = opts, name = name ~= "" and name or nil }
  return (C.call(mech.task.from_spec, spec))
end

--- mech.task.from_checkpoint(path | meta) -> task, or nil and why (argument checked in C). The task
--- recorded by train.run (metadata task.spec); for checkpoints written before it, the preset named
--- by task.name at the training seed, else the task of the manifest.json beside the file.
function M.from_checkpoint(src, opts)
  local fn = "mech.task.from_checkpoint"
  opts = opts or {}
  local meta = type(src) == "string" and C.meta(src) or src
  local function get(key)
    local v = meta[key]
    return type(v) == "string" and v or ""
  end
  local spec, name = get("task.spec"), get("task.name")
  if spec ~= "" then
    local record = decode(spec, fn, "metadata task.spec")
    -- a file the record names is read from the checkpoint's own directory, and only from there
    local dir = opts.dir or type(src) == "string" and (src:match("^(.*)/[^/]*$") or ".") or nil
    if dir == "" then dir = "/" end
    if type(record) == "table" and record.kind == "jsonl" and not dir then
      fail(fn, "a jsonl task record is read from the checkpoint's directory: pass the checkpoint's path, or "
        .. "{dir = its directory}")
    end
    if type(record) ~= "table" then fail(fn, "metadata task.spec expected a JSON object") end
    return (C.call(mech.task.from_spec, record, { modules = opts.modules, dir = dir }))
  end
  local t = preset_at_seed(name, get("train.seed"))
      or type(src) == "string" and manifest_task(src, name, fn) or nil
  if t then return t end
  local what = type(src) == "string" and src or "the metadata"
  if name ~= "" then
    return nil, string.format("%s: %s records only the task's name '%s' (a checkpoint written before task records); "
      .. "build the task with mech.task.* and pass it", fn, what, name)
  end
  return nil, string.format("%s: %s records no task (not written by mech.train); build the task with mech.task.* "
    .. "and pass it", fn, what)
end

return M
