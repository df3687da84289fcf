--- Tasks made outside C (docs/tasks.md, "Your own task"): written in Lua (mech.task.new), made by a
--- module from its options (mech.task.load), or read from a JSON-lines file (mech.task.from_jsonl);
--- datasets written back to that format (ds:write_jsonl) and text to token ids (task:to_tokens).
--- Also the reading of task records of every kind: mech.task.from_spec and mech.task.from_checkpoint.
---
--- Such a task is a C task of kind CUSTOM (src/tasks/custom.c: vocabulary, names, declared
--- positions, corruption pool, holdout; every document is checked there and stored in the same
--- dataset storage as the built-in tasks', so batches and training steps cost the same). Its Lua
--- definition (this file's table `d`) is the task userdata's user value. This file draws the
--- documents, gives the messages their context and keeps the record (`task:spec()`).
local C = require "mech.task_c"
local json = require "mech.json"
local util = require "mech.util"
local trust = require "mech.trust"

local M = {}

local function fail(fn, msg) error(fn .. ": " .. msg, 0) end

local function definition(task) return (debug.getuservalue(task, 1)) end

local position_set = {}
for _, p in ipairs(mech.task.positions) do position_set[p] = true end
-- A task's positions: the paper's eight (slots 0..7) and free names after them (docs/tasks.md,
-- "Position names"); C keeps ML_MAX_POS = 64 slots in all.
local MAX_POSITIONS, NAME_BYTES = 64, 31

-- Checks option 'positions' (a list of names) with messages that name the entry.
local function check_positions(fn, positions)
  if type(positions) ~= "table" then fail(fn, "option 'positions' expected a list of position names") end
  local seen, n_free = {}, 0
  for i, p in ipairs(positions) do
    if type(p) ~= "string" then
      fail(fn, string.format("option 'positions' entry %d expected a position name (a string), got %s", i, type(p)))
    end
    if seen[p] then fail(fn, string.format("option 'positions' lists '%s' twice (entries %d and %d)", p, seen[p], i)) end
    seen[p] = i
    if not position_set[p] then
      if not p:match("^[%a_][%w_]*$") or #p > NAME_BYTES then
        fail(fn, string.format("option 'positions' entry %d is '%s': a position name is one of the paper's (%s) or "
          .. "an identifier of your own (letters, digits and '_', not starting with a digit, at most %d bytes)", i, p,
          table.concat(mech.task.positions, ", "), NAME_BYTES))
      end
      if p == "all_target_items_orig" then
        fail(fn, "option 'positions' entry " .. i .. " is 'all_target_items_orig', a document field, not a position name")
      end
      n_free = n_free + 1
    end
  end
  if n_free > MAX_POSITIONS - #mech.task.positions then
    fail(fn, string.format("option 'positions' names %d positions of its own, at most %d (%d slots in all, the "
      .. "paper's %d first)", n_free, MAX_POSITIONS - #mech.task.positions, MAX_POSITIONS, #mech.task.positions))
  end
end

-- Options must be plain data: checkpoints, manifests and sweep.json record them as JSON.
local function check_data(v, where, fn, depth)
  local t = type(v)
  if t == "table" then
    if (depth or 0) > 32 then fail(fn, where .. " is nested too deeply") end
    for k, x in pairs(v) do
      if type(k) ~= "string" and math.type(k) ~= "integer" then
        fail(fn, string.format("%s has a key of type %s; options must be plain data", where, type(k)))
      end
      check_data(x, where .. "." .. tostring(k), fn, (depth or 0) + 1)
    end
  elseif t ~= "string" and t ~= "number" and t ~= "boolean" then
    fail(fn, string.format("%s is a %s; a task's options must be plain data (strings, numbers, booleans, tables) "
      .. "so that checkpoints and sweep.json can record them", where, t))
  end
end

-- The module, options, seed and name of the task mech.task.load is making (its record).
local loading = {}

-- The C task of a definition (common to Lua and file tasks). def: the user's options.
local function make(fn, kind, name, def, d)
  if type(name) ~= "string" or not name:match("^[%w_%.%-]+$") or #name > 31 then
    fail(fn, "option 'name' expected a name of at most 31 letters, digits, '_', '.' or '-', got " .. tostring(name))
  end
  local vocab, names, ids, V = def.vocab, nil, nil, nil
  if type(vocab) == "table" then
    names, ids = {}, {}
    for i, s in ipairs(vocab) do
      if type(s) ~= "string" or s == "" or s:find("%s") then
        fail(fn, string.format("option 'vocab' entry %d expected a token name (a string without spaces), got %s", i,
          tostring(s)))
      end
      if ids[s] then fail(fn, string.format("option 'vocab' names '%s' twice (entries %d and %d)", s, ids[s] + 1, i)) end
      names[i], ids[s] = s, i - 1
    end
    V = #names
    if V == 0 then fail(fn, "option 'vocab' expected a non-empty list of token names") end
  elseif math.type(vocab) == "integer" and vocab >= 1 then
    V = vocab
  else
    fail(fn, "option 'vocab' expected a vocabulary size (an integer >= 1) or a list of token names, got "
      .. tostring(vocab))
  end
  local positions = def.positions or {}
  check_positions(fn, positions)
  local function token_id(v, what)
    if math.type(v) == "integer" and v >= 0 and v < V then return v end
    if type(v) == "string" and ids and ids[v] then return ids[v] end
    fail(fn, string.format("option 'corrupt' %s expected a token id in 0..%d%s, got %s", what, V - 1,
      ids and " or a token name" or "", tostring(v)))
  end
  local lo, hi = -1, -1
  if def.corrupt ~= nil then
    if type(def.corrupt) ~= "table" or #def.corrupt ~= 2 then
      fail(fn, "option 'corrupt' expected {lo, hi}: the token ids (or names) a corrupted position draws from")
    end
    lo, hi = token_id(def.corrupt[1], "lo"), token_id(def.corrupt[2], "hi")
  end
  local holdout = def.holdout or 0
  if type(holdout) ~= "number" or not (holdout >= 0 and holdout < 1) then
    fail(fn, "option 'holdout' expected a fraction in [0, 1), got " .. tostring(holdout))
  end
  local seed = loading.seed or def.seed or 42
  if math.type(seed) ~= "integer" then fail(fn, "option 'seed' expected an integer, got " .. tostring(seed)) end
  d.kind, d.seed, d.names, d.ids, d.V = kind, seed, names, ids, V
  d.positions, d.holdout = util.copy(positions), holdout
  return C.custom(name, seed, names or V, positions, lo, hi, holdout, d)
end

local new_keys = { name = 1, vocab = 1, sample = 1, sample_batch = 1, positions = 1, corrupt = 1, holdout = 1, seed = 1, module = 1,
  options = 1 }

--- mech.task.new{name=, vocab=, sample= | sample_batch=, positions=, corrupt=, holdout=, seed=, module=, options=}
function M.new(def)
  local fn = "mech.task.new"
  if type(def) ~= "table" then fail(fn, "argument 1 expected a table {name=, vocab=, sample=, positions=}, got " .. type(def)) end
  for k in pairs(def) do
    if not new_keys[k] then
      fail(fn, string.format("unknown option '%s' (did you mean '%s'?)", tostring(k), util.closest(k, new_keys)))
    end
  end
  if def.sample_batch ~= nil and type(def.sample_batch) ~= "function" then
    fail(fn, "option 'sample_batch' expected a function(gen, split, n) that returns n documents as tensors, got "
      .. type(def.sample_batch))
  end
  if type(def.sample) ~= "function" and not (def.sample == nil and def.sample_batch) then
    fail(fn, "option 'sample' expected a function(gen, split) that returns a document (or give 'sample_batch'), got "
      .. type(def.sample))
  end
  local module, options = def.module or loading.module, def.options
  if options == nil then options = loading.options end
  if module ~= nil and type(module) ~= "string" then fail(fn, "option 'module' expected a module name") end
  if options ~= nil then check_data(options, "option 'options'", fn) end
  return make(fn, "lua", def.name, def, { sample = def.sample, sample_batch = def.sample_batch, module = module,
    options = util.copy(options) })
end

-- Task constructors a file's record may name (docs/security.md): the values modules registered
-- with mech.task.register, and the constructors the user's own mech.task.load calls used.
local registered = setmetatable({}, { __mode = "k" })
local made = setmetatable({}, { __mode = "k" })

--- mech.task.register(f | {name = f, ...}) -> the same value: declares a module's task
--- constructors (a module of tasks ends with `return mech.task.register(M)`), the only functions
--- a checkpoint's or a sweep's record may call.
function M.register(value)
  if type(value) ~= "function" and type(value) ~= "table" then
    fail("mech.task.register", "argument 1 expected a function of the options that makes a task, or a table of them "
      .. "by task name, got " .. type(value))
  end
  registered[value] = true
  return value
end

-- The function of module value `mod` that makes task `name` (nil: the module's one task).
local function constructor(mod, name)
  if type(mod) == "function" then return mod end
  if type(mod) == "table" then
    local f = mod[name or ""]
    if type(f) ~= "function" then f = mod.task end
    if type(f) == "function" then return f end
  end
end

-- The task that f makes from options, recorded as made by `module`.
local function build(fn, module, f, options, seed)
  local saved = loading
  loading = { module = module, options = util.copy(options or {}), seed = seed }
  local ok, task = pcall(f, util.copy(options or {}))
  loading = saved
  if not ok then error(task, 0) end
  if not (type(task) == "userdata" and tostring(task):match("^mech%.Task") and definition(task)) then
    fail(fn, string.format("module '%s' returned %s, expected a task made with mech.task.new", module, tostring(task)))
  end
  return task
end

local function check_load_args(fn, module, options, seed)
  if type(module) ~= "string" then fail(fn, "argument 1 expected a module name, got " .. type(module)) end
  if options ~= nil and type(options) ~= "table" then fail(fn, "argument 2 expected a table of options, got " .. type(options)) end
  if seed ~= nil and math.type(seed) ~= "integer" then fail(fn, "argument 3 expected an integer seed, got " .. tostring(seed)) end
  check_data(options or {}, "argument 2", fn)
end

local function not_a_task_module(fn, module, mod, name)
  return string.format("module '%s' expected to return a function of the options that makes the task (or a table of "
    .. "them by task name%s), got %s", module, name and (", '" .. tostring(name) .. "' among them") or "", type(mod))
end

--- mech.task.load(module, [options], [seed], [name]): the task that `require(module)` makes from
--- options (a function of the options, or a table of such functions keyed by task name). The
--- user's code names the module, so it may be any; what it used, a record may name again.
function M.load(module, options, seed, name)
  local fn = "mech.task.load"
  check_load_args(fn, module, options, seed)
  local ok, mod = pcall(require, module)
  if not ok then
    fail(fn, string.format("cannot load module '%s' of the Lua task%s: %s", module,
      name and (" '" .. tostring(name) .. "'") or "", tostring(mod):match("^[^\n]*")))
  end
  local f = constructor(mod, name)
  if not f then fail(fn, not_a_task_module(fn, module, mod, name)) end
  local task = build(fn, module, f, options, seed)
  made[f] = true
  return task
end

-- The task of a record {module, name, options, seed} a file holds: its module used only when loaded
-- already or allowed (`modules`: the call's set), its constructor only one the module registered
-- or the user's mech.task.load used. A module required here and then refused is forgotten again.
local function load_recorded(fn, spec, modules)
  local module, name = spec.module, spec.name
  check_load_args(fn, module, spec.options, spec.seed)
  local mod, required = package.loaded[module], false
  if mod == nil then
    if not trust.allowed(module, modules) then
      fail(fn, trust.refusal(string.format("the record of Lua task '%s'", tostring(name)), module))
    end
    local ok, v = pcall(require, module)
    if not ok then
      fail(fn, string.format("cannot load module '%s' of the Lua task '%s': %s", module, tostring(name),
        tostring(v):match("^[^\n]*")))
    end
    mod, required = v, true
  end
  local f = constructor(mod, name)
  if not (f and (registered[mod] or made[f])) then
    if required then package.loaded[module] = nil end
    fail(fn, string.format("module '%s' registered no task '%s'; a record may only name a task constructor its "
      .. "module registered (it ends with `return mech.task.register(M)`, docs/tasks.md) or that your code made a "
      .. "task with (mech.task.load)", module, tostring(name)))
  end
  local ok, task = pcall(build, fn, module, f, spec.options, spec.seed)
  if not ok then
    if required then package.loaded[module] = nil end
    error(task, 0)
  end
  return task
end

-- Draws n documents with sample_batch: batches of at most the documents still missing (a batch
-- may hold fewer: a rejection sampler drops rows, a holdout rejects some), each checked row by row
-- in C.
local function draw_batches(task, d, ds, n, split, gen, scratch)
  local sample_batch, append_batch = d.sample_batch, C.append_batch
  local i, drawn, phase, row = 0, 0, "sample", nil
  local limit = 1000 + 100 * n
  local ok, err = pcall(function()
    while i < n do
      phase = "sample"
      local want = n - i
      local batch = sample_batch(gen, split, want)
      phase = "batch"
      local kept, rows, msg = append_batch(ds, batch, scratch, want)
      if not kept then
        phase, row = "doc", rows
        error(msg, 0)
      end
      i, drawn = i + kept, drawn + rows
      if drawn - i > limit then
        phase = "holdout"
        error(string.format("%d documents drawn, %d kept", drawn, i), 0)
      end
    end
  end)
  if ok then return C.done(ds) end
  local where = string.format("task:dataset: task '%s'", task:name())
  if phase == "sample" then fail(where, string.format("its sample_batch function failed (%d documents asked, %d "
    .. "kept before): %s", n - i, i, tostring(err))) end
  if phase == "holdout" then
    fail(where, string.format("the holdout (%g) keeps almost no document of split %s (%s)", d.holdout, split, err))
  end
  if phase == "batch" then fail(where, string.format("the batch of documents %d.. of split %s is wrong: %s", i, split,
    tostring(err))) end
  fail(string.format("%s, document %d of split %s (row %d of its batch)", where, #ds, split, row),
    "the sample_batch function's document is wrong: " .. tostring(err))
end

-- Draws n documents of split into a dataset: the sample function's, checked one by one (or the
-- batched form's when the task has one).
local function draw(task, d, n, seed, split, gen)
  local ds, own, scratch = C.open(task, n, seed, split)
  gen = gen or own
  if d.sample_batch then return draw_batches(task, d, ds, n, split, gen, scratch) end
  local sample, append = d.sample, C.append
  local i, drawn, phase = 0, 0, "sample"
  local limit = 1000 + 100 * n -- rejections a holdout may cause before it is hopeless
  local ok, err = pcall(function()
    while i < n do
      phase = "sample"
      local doc = sample(gen, split)
      phase = "doc"
      drawn = drawn + 1
      if append(ds, doc, scratch) then
        i = i + 1
      elseif drawn - i > limit then
        phase = "holdout"
        error(string.format("%d documents drawn, %d kept", drawn, i), 0)
      end
    end
  end)
  if not ok then
    local where = string.format("task:dataset: task '%s', document %d of split %s", task:name(), i, split)
    if phase == "sample" then fail(where, "its sample function failed: " .. tostring(err)) end
    if phase == "holdout" then
      fail(where, string.format("the holdout (%g) keeps almost no document of this split (%s)", d.holdout, err))
    end
    fail(where, "the sample function's document is wrong: " .. tostring(err))
  end
  return C.done(ds)
end

-- The documents of a file task for split, in file order (all of them when n is nil).
local function file_dataset(task, d, n, split)
  local ds, _, scratch = C.open(task, n or #d.docs, 0, split)
  local i = 0
  for _, e in ipairs(d.docs) do
    if i == n then break end
    if (e.split == nil or e.split == split) and C.append(ds, e.doc, scratch) then i = i + 1 end
  end
  if n and i < n then
    fail("task:dataset", string.format("%s holds %d documents of split %s, asked for %d", d.path, i, split, n))
  end
  return C.done(ds)
end

--- task:dataset for a task made outside C (src/lua/task.c parses the arguments; n nil: the default).
function M.dataset(task, n, seed, split)
  local d = definition(task)
  if d.kind == "jsonl" then return file_dataset(task, d, n, split) end
  n = n or (split == "train" and mech.task.TRAIN_DOCS or mech.task.EVAL_DOCS)
  return draw(task, d, n, seed, split)
end

--- task:sample([seed | generator], [split]): document 0 of task:dataset(1, {seed, split}), or the
--- next one of a generator (nothing: the task's own stream, so calls differ).
function M.sample(task, g, split)
  local d = definition(task)
  split = split or "train"
  if d.kind == "jsonl" then return file_dataset(task, d, 1, split):doc(0) end
  if g == nil then
    d.gen = d.gen or mech.Generator(d.seed, 0x7a5c) -- a stream no dataset uses
    g = d.gen
  end
  local seed = math.type(g) == "integer" and g or d.seed
  return draw(task, d, 1, seed, split, math.type(g) ~= "integer" and g or nil):doc(0)
end

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
    fail(fn, "option 'dir' expected a directory, got " .. type(opts.dir))
  end
  local function optstr(key)
    local v = spec[key]
    if v ~= nil and type(v) ~= "string" then
      fail(fn, string.format("option '%s' expected a string, got %s", key, type(v)))
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
    return M.from_jsonl(spec.path, jopts, opts.dir)
  end
  if spec.module == nil then
    fail(fn, string.format("the Lua task '%s' was made without a module, so its record cannot rebuild it: define it "
      .. "in a module that returns a function of its options and make it with mech.task.load(module, options)",
      tostring(spec.name)))
  end
  return load_recorded(fn, spec, modules)
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

------------------------------------------------------------------------------------------------
-- JSON lines

local jsonl_keys = { vocab = 1, positions = 1, corrupt = 1, holdout = 1, name = 1, seed = 1 }
local splits = { train = true, dev = true, test = true }

M.DATA_BYTES = 256 * 1024 * 1024 -- the most a JSON-lines task file may hold (docs/security.md)
M.MANIFEST_BYTES = 16 * 1024 * 1024 -- the most a manifest.json read for its task may hold

--- mech.task.from_jsonl(path, [{vocab=, positions=, corrupt=, holdout=, name=, seed=}]) (dir: a
--- record's directory, which the file must lie below: from_spec's option)
function M.from_jsonl(path, opts, dir)
  local fn = "mech.task.from_jsonl"
  if type(path) ~= "string" then fail(fn, "argument 1 expected a file path, got " .. type(path)) end
  opts = opts or {}
  if type(opts) ~= "table" then fail(fn, "argument 2 expected a table of options, got " .. type(opts)) end
  for k in pairs(opts) do
    if not jsonl_keys[k] then
      fail(fn, string.format("unknown option '%s' (did you mean '%s'?)", tostring(k), util.closest(k, jsonl_keys)))
    end
  end
  check_data(opts, "argument 2", fn)
  -- a regular file within the bound (a FIFO or /dev/zero never), below dir when a record names it
  local text, err = C.read_data(path, dir, M.DATA_BYTES)
  if not text then fail(fn, err) end
  local docs, header, lineno = {}, nil, 0
  for line in text:gmatch("([^\n]*)\n?") do
    lineno = lineno + 1
    if line:find("%S") then
      local ok, v = pcall(json.decode, line)
      if not ok then fail(fn, string.format("%s:%d: %s", path, lineno, v)) end
      if type(v) ~= "table" or v[1] ~= nil then
        fail(fn, string.format("%s:%d: expected a JSON object", path, lineno))
      end
      if v.tokens == nil and v.vocab ~= nil and #docs == 0 and not header then
        header = v
      else
        local split = v.split
        if split ~= nil and not splits[split] then
          fail(fn, string.format("%s:%d: field 'split' expected \"train\", \"dev\" or \"test\", got %s", path, lineno,
            tostring(split)))
        end
        v.split = nil
        docs[#docs + 1] = { doc = v, split = split, line = lineno }
      end
    end
  end
  if #docs == 0 then fail(fn, path .. " holds no document") end
  -- the vocabulary: given, else the file's header, else the tokens seen (names in order of first
  -- appearance, or ids 0 .. the largest)
  local vocab = opts.vocab or header and header.vocab
  if vocab == nil then
    local names, seen, max_id = {}, {}, -1
    local function see(x)
      if type(x) == "string" and not seen[x] then seen[x] = true names[#names + 1] = x end
      if math.type(x) == "integer" and x > max_id then max_id = x end
    end
    for _, e in ipairs(docs) do
      for _, x in ipairs(type(e.doc.tokens) == "table" and e.doc.tokens or {}) do see(x) end
      for _, x in ipairs(type(e.doc.answers) == "table" and e.doc.answers or {}) do see(x) end
    end
    if #names > 0 and max_id >= 0 then fail(fn, path .. " mixes token ids and token names; give option 'vocab'") end
    vocab = #names > 0 and names or max_id + 1
  end
  local positions = opts.positions or header and header.positions
  if positions == nil then -- those the documents carry: the paper's in mech.task.positions order, then the others by name
    local used, others = {}, {}
    for _, e in ipairs(docs) do
      for k in pairs(type(e.doc.positions) == "table" and e.doc.positions or {}) do
        if not used[k] and k ~= "all_target_items_orig" and not position_set[k] then others[#others + 1] = k end
        used[k] = true
      end
    end
    positions = {}
    for _, p in ipairs(mech.task.positions) do if used[p] then positions[#positions + 1] = p end end
    table.sort(others, function(a, b) return tostring(a) < tostring(b) end)
    for _, p in ipairs(others) do positions[#positions + 1] = p end
  end
  local name = opts.name or header and header.name or (path:match("([^/]+)$"):gsub("%.jsonl?$", ""):gsub("[^%w_%.%-]", "_"):sub(1, 31))
  local def = { vocab = vocab, positions = positions, corrupt = opts.corrupt or header and header.corrupt,
    holdout = opts.holdout, seed = opts.seed }
  local record = util.copy(opts)
  record.name, record.seed = nil, nil
  local task = make(fn, "jsonl", name, def, { docs = docs, path = path, options = record })
  -- every line is checked now, so that a bad one is reported with its line number before any use
  local ds, _, scratch = C.open(task, #docs, 0, "train")
  for _, e in ipairs(docs) do
    local ok, msg = pcall(C.append, ds, e.doc, scratch)
    if not ok then fail(fn, string.format("%s:%d: %s", path, e.line, msg)) end
  end
  return task
end

--- ds:write_jsonl(path): the dataset as JSON lines (a header with the vocabulary, then one
--- document per line: tokens, readouts, answers, positions, split), written atomically.
function M.write_jsonl(ds, path)
  local fn = "dataset:write_jsonl"
  if type(ds) ~= "userdata" or not tostring(ds):match("^mech%.Dataset") then
    fail(fn, "argument 1 expected a mech.Dataset, got " .. type(ds))
  end
  if type(path) ~= "string" then fail(fn, "argument 2 expected a file path, got " .. type(path)) end
  local task = ds:task()
  local d = definition(task)
  local V, names = task:vocab_size(), d and d.names -- a Lua task's own names (C's are cut at 31 bytes)
  if not names then
    names = {}
    for i = 0, V - 1 do names[i + 1] = task:token_name(i) end
  end
  local positions, declared = {}, {}
  local parts = { "" } -- the header, once the positions are known
  for i = 0, #ds - 1 do
    local doc = ds:doc(i)
    local pos = {}
    for k, v in pairs(doc.positions) do
      if k ~= "all_target_items_orig" then pos[k] = v; declared[k] = true
      elseif #v > 0 then pos[k] = v end
    end
    local line = { tokens = doc.tokens, readouts = doc.readouts, answers = doc.answers, positions = pos, split = doc.split }
    if doc.type ~= "KEY" then line.type = doc.type end
    parts[#parts + 1] = json.encode(line)
  end
  -- the task's order (the paper's eight, then its own names): a round trip keeps the columns
  if d then for _, p in ipairs(d.positions) do declared[p] = true end end
  for _, p in ipairs(task:positions()) do if declared[p] then positions[#positions + 1] = p end end
  local lo, hi = task:corrupt_range()
  local vocab = (d and not d.names) and V or names
  parts[1] = json.encode { vocab = vocab, positions = positions, corrupt = { lo, hi }, name = task:name() }
  mech.sys.write_atomic(path, table.concat(parts, "\n") .. "\n")
end

------------------------------------------------------------------------------------------------
-- Text in

--- task:to_tokens(text | {text, ...}) -> int32 (B, Lmax), right-padded with PAD (0): tokens
--- separated by spaces, each a name of the task's vocabulary (or an id where tokens have no names).
function M.to_tokens(task, x)
  local fn = "task:to_tokens"
  if type(task) ~= "userdata" or not tostring(task):match("^mech%.Task") then
    fail(fn, "argument 1 expected a mech.Task, got " .. type(task))
  end
  local rows = type(x) == "string" and { x } or x
  if type(rows) ~= "table" or #rows == 0 then
    fail(fn, "argument 1 expected a string of tokens or a non-empty list of them, got " .. type(x))
  end
  local d, ids = definition(task), nil
  if d then ids = d.ids end
  if not ids and not (d and not d.names) then
    ids = {}
    for i = 0, task:vocab_size() - 1 do ids[task:token_name(i)] = i end
  end
  local V, out, L = task:vocab_size(), {}, 0
  for r, row in ipairs(rows) do
    local words = row
    if type(row) == "string" then
      words = {}
      for w in row:gmatch("%S+") do words[#words + 1] = w end
    elseif type(row) ~= "table" then
      fail(fn, string.format("entry %d expected a string of tokens or a list of token names, got %s", r, type(row)))
    end
    local ids_row = {}
    for j, w in ipairs(words) do
      local id = ids and ids[w]
      if not ids then
        id = math.tointeger(tonumber(w))
        if id and (id < 0 or id >= V) then id = nil end
      end
      if not id then
        fail(fn, string.format("unknown token '%s' (row %d, token %d): not in the vocabulary of task '%s'",
          tostring(w):sub(1, 40), r, j, task:name()))
      end
      ids_row[j] = id
    end
    if #ids_row == 0 then fail(fn, string.format("entry %d holds no token", r)) end
    out[r] = ids_row
    if #ids_row > L then L = #ids_row end
  end
  for _, row in ipairs(out) do for j = #row + 1, L do row[j] = mech.task.PAD end end
  return mech.tensor(out, { dtype = "int32" })
end

return M
