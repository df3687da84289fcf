--- Tasks written in Lua (mech.task.new) and made by a module from its options (mech.task.load,
--- mech.task.register); the task a record's module makes, when trusted (load_recorded).
local util = require "mech.util"
local trust = require "mech.trust"
local D = require "mech.task_custom.definition"

local M = {}
local fail = D.fail

local new_keys = { name = 1, vocab = 1, sample = 1, sample_batch = 1, positions = 1, corrupt = 1, holdout = 1, seed = 1, module = 1,
  options = 1 }

--- mech.task.new{name=, vocab=, sample= | sample_batch=, positions=, corrupt=, holdout=, seed=, module=, options=}
function M.new(def)
  local fn = "mech.task.new"
  if type(def) ~= "table" then fail(fn, "argument 1 expected a table {name=, vocab=, sample=, positions=}, got " .. type(def)) end
  D.check_keys(fn, def, new_keys)
  if def.sample_batch ~= nil and type(def.sample_batch) ~= "function" then
    fail(fn, "option 'sample_batch': expected a function(gen, split, n) that returns n documents as tensors, got "
      .. type(def.sample_batch))
  end
  if type(def.sample) ~= "function" and not (def.sample == nil and def.sample_batch) then
    fail(fn, "option 'sample': expected a function(gen, split) that returns a document (or give 'sample_batch'), got "
      .. type(def.sample))
  end
  local loading = D.loading()
  local module, options = def.module or loading.module, def.options
  if options == nil then options = loading.options end
  if module ~= nil and type(module) ~= "string" then fail(fn, "option 'module': expected a module name") end
  if options ~= nil then D.check_data(options, "option 'options'", fn) end
  return D.make(fn, "lua", def.name, def, { sample = def.sample, sample_batch = def.sample_batch, module = module,
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
  local ok, task = D.call_loading({ module = module, options = util.copy(options or {}), seed = seed }, f,
    util.copy(options or {}))
  if not ok then error(task, 0) end
  if not (type(task) == "userdata" and tostring(task):match("^mech%.Task") and D.of(task)) then
    fail(fn, string.format("module '%s' returned %s, expected a task made with mech.task.new", module, tostring(task)))
  end
  return task
end

local function check_load_args(fn, module, options, seed)
  if type(module) ~= "string" then fail(fn, "argument 1 expected a module name, got " .. type(module)) end
  if options ~= nil and type(options) ~= "table" then fail(fn, "argument 2 expected a table of options, got " .. type(options)) end
  if seed ~= nil and math.type(seed) ~= "integer" then fail(fn, "argument 3 expected an integer seed, got " .. tostring(seed)) end
  D.check_data(options or {}, "argument 2", fn)
end

local function not_a_task_module(module, mod, name)
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
  if not f then fail(fn, not_a_task_module(module, mod, name)) end
  local task = build(fn, module, f, options, seed)
  made[f] = true
  return task
end

--- The task of a record {module, name, options, seed} a file holds: its module used only when
--- loaded already or allowed (`modules`: the call's set), its constructor only one the module
--- registered or the user's mech.task.load used. A module required here and then refused is
--- forgotten again.
function M.load_recorded(fn, spec, modules)
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

return M
