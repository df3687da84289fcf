-- The Module class (docs/nn.md, "Layers"): the base of every layer and of modules written in Lua.
-- A module is a Lua table whose metatable is its class. Children (modules assigned to fields) and
-- parameters (self:param) are kept in one registration order, which is the order of
-- named_parameters() and state_dict(). Every module sits at one path in its tree
-- ("blocks.1.mixer"); calling it fires its output as the hook site at that path
-- (mech.nn.hook_context). This file makes the mech.nn table that mech.nn.module completes.
local mech = _G.mech
local util = require "mech.util"
local checks = require "mech.nn.checks"
local context = require "mech.nn.hook_context"

local M = {}
local shape_str, same_shape = checks.shape_str, checks.same_shape

local Module = {}
M.Module = Module
M.registry = {} -- registered class name -> class

local function is_class(c) return type(c) == "table" and rawget(c, "__nnclass") == true end
local function is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__nnclass") == true
end
M.is_module = is_module

local function class_name(self) return rawget(getmetatable(self), "__name") or "Module" end

-- "blocks.1.mixer (Gate)" or "Gate" for a root: how messages name a module.
local function where(self)
  local p = rawget(self, "_path")
  return (p and p ~= "") and (p .. " (" .. class_name(self) .. ")") or class_name(self)
end
M.where = where

-- "a.b": the path (or state-dict name) of b under a; either may be "" (a root).
local function join(a, b)
  if a == "" then return b end
  if b == "" then return a end
  return a .. "." .. b
end
M._join = join

-- Recomputes the paths and state prefixes of self's subtree after it moved.
local function set_paths(self, path, state)
  rawset(self, "_path", path)
  rawset(self, "_state", state)
  for _, e in ipairs(rawget(self, "_order")) do
    if e.child then
      local c = rawget(self, "_modules")[e.name]
      set_paths(c, join(path, e.name), join(state, e.state))
    end
  end
end

local function order_index(self, name)
  for i, e in ipairs(rawget(self, "_order")) do
    if e.name == name then return i end
  end
end

-- Instance field lookup: children, then parameters, then the class.
local function index(self, k)
  local c = rawget(self, "_modules")[k]
  if c ~= nil then return c end
  if math.type(k) == "integer" then return rawget(self, "_modules")[tostring(k)] end
  local pn = rawget(self, "_pfield")[k]
  if pn then return rawget(self, "_params")[pn] end
  return getmetatable(self)[k]
end

local function newindex(self, k, v)
  if is_module(v) then return self:add_module(k, v) end
  local mods = rawget(self, "_modules")
  if mods[k] ~= nil then -- a child replaced by a non-module or removed
    local old = mods[k]
    rawset(old, "_parent", nil)
    set_paths(old, "", "")
    mods[k] = nil
    table.remove(rawget(self, "_order"), order_index(self, k))
    if v == nil then return end
  end
  if mech.is_tensor(v) then -- self.w = self:param("w", ...): the field reads the parameter
    for name, p in pairs(rawget(self, "_params")) do
      if p == v then
        rawget(self, "_pfield")[k] = name
        return
      end
    end
  end
  rawget(self, "_pfield")[k] = nil
  rawset(self, k, v)
end

-- module(...): forward, then the output fires as the site at the module's path.
local function call(self, ...)
  local hooks = rawget(self, "_hooks")
  if hooks and #hooks > 0 and not rawget(self, "_hooking") then
    return M._run_hooked(self, { ... }, select("#", ...), {}) -- set by mech.nn.hooks, which adds hooks
  end
  if not context.active() then return self:forward(...) end
  local out = self:forward(...)
  local path = rawget(self, "_path")
  if path ~= "" then out = context.fire(path, out) end
  return out
end

local metamethods = { "__index", "__newindex", "__call", "__tostring", "__len" }

--- Module:extend(name) -> a new class; Class{...} or Class(...) makes an instance and calls init.
function Module:extend(name)
  if type(name) ~= "string" or not name:match("^[%a_][%w_%.]*$") then
    error("mech.nn.Module:extend: argument 1 expected a class name (a string such as \"Gate\"), got " ..
      (type(name) == "string" and ("'" .. name .. "'") or type(name)), 2)
  end
  local cls = { __nnclass = true, __name = name, super = self }
  for _, mm in ipairs(metamethods) do cls[mm] = rawget(self, mm) end
  setmetatable(cls, { __index = self, __call = function(c, ...) return c:new(...) end,
    __tostring = function(c) return "mech.nn class " .. rawget(c, "__name") end })
  M.registry[name] = cls
  return cls
end

--- Class:new(...) -> instance (what Class(...) calls).
function Module:new(...)
  if not is_class(self) then error("mech.nn: new must be called on a class (Class(...) or Class:new(...))", 2) end
  local obj = { _modules = {}, _order = {}, _params = {}, _pfield = {}, _specs = {}, _path = "", _state = "",
    training = true }
  setmetatable(obj, self)
  obj:init(...)
  return obj
end

function Module:init() end

function Module:forward()
  error(string.format("mech.nn: %s has no forward (define function %s:forward(x))", where(self), class_name(self)), 2)
end

Module.__nnclass = true
Module.__name = "Module"
Module.__index = index
Module.__newindex = newindex
Module.__call = call
M.registry.Module = Module
setmetatable(Module, { __call = function(c, ...) return c:new(...) end,
  __tostring = function() return "mech.nn class Module" end })

-- ------------------------------------------------------------------ children

--- self:add_module(name, module[, state]): a child at field `name`; `state` is the prefix of its
--- parameters' state-dict names (default: name; "" puts them at self's own level).
function Module:add_module(name, child, state)
  if type(name) ~= "string" or not name:match("^[%w_]+$") then
    error(string.format("mech.nn: %s: a child's name must be letters, digits or _ (a dot would collide with the path of a grandchild), got %s",
      where(self), type(name) == "string" and ("'" .. name .. "'") or type(name)), 2)
  end
  if not is_module(child) then error(string.format("mech.nn: %s: child '%s' expected a module, got %s", where(self), name, type(child)), 2) end
  if state ~= nil and type(state) ~= "string" then
    error(string.format("mech.nn: %s: child '%s' expected a state-dict prefix (string), got %s", where(self), name, type(state)), 2)
  end
  if rawget(self, "_params")[name] or rawget(self, name) ~= nil then
    error(string.format("mech.nn: %s: the name '%s' is taken (a parameter or field); a hook name must name one thing", where(self), name), 2)
  end
  local up = self
  while up do
    if up == child then
      error(string.format("mech.nn: %s: cannot add the module as its own descendant (a tree has no cycles)", where(self)), 2)
    end
    up = rawget(up, "_parent")
  end
  local parent = rawget(child, "_parent")
  if parent and not (parent == self and rawget(self, "_modules")[name] == child) then
    error(string.format("mech.nn: %s: cannot place the module at %s under '%s' too: it already sits at %s, and a module has one path (its hook sites would collide); make a second instance",
      where(self), class_name(child), join(rawget(self, "_path"), name), rawget(child, "_path")), 2)
  end
  local mods = rawget(self, "_modules")
  local old = mods[name]
  if old and old ~= child then
    rawset(old, "_parent", nil)
    set_paths(old, "", "")
  end
  local i = order_index(self, name)
  local e = { name = name, child = true, state = state or name }
  if i then rawget(self, "_order")[i] = e else table.insert(rawget(self, "_order"), e) end
  mods[name] = child
  rawset(child, "_parent", self)
  set_paths(child, join(rawget(self, "_path"), name), join(rawget(self, "_state"), e.state))
  return child
end

--- self:named_children() -> { {name, module}, ... } in assignment order.
function Module:named_children()
  local out = {}
  for _, e in ipairs(rawget(self, "_order")) do
    if e.child then out[#out + 1] = { e.name, rawget(self, "_modules")[e.name] } end
  end
  return out
end

function Module:children()
  local out = {}
  for _, nc in ipairs(self:named_children()) do out[#out + 1] = nc[2] end
  return out
end

--- self:modules() -> every module of the tree, self first (pre-order).
function Module:modules()
  local out = {}
  local function walk(m)
    out[#out + 1] = m
    for _, c in ipairs(m:children()) do walk(c) end
  end
  walk(self)
  return out
end

--- self:path() -> the module's path in its tree ("" for a root).
function Module:path() return rawget(self, "_path") end

-- ------------------------------------------------------------------ parameters

-- Initialisers by kind; fan is in_features (Linear) or K (conv), as PyTorch's defaults.
local function uniform(shape, a, b, gen)
  return mech.rand(shape, { generator = gen }) * (b - a) + a
end

local function default_fan(kind, shape)
  if kind == "linear_weight" or kind == "conv_weight" then return shape[#shape] end
end

local function make_param(self, name, shape, opts)
  -- outside a model, the default generator (seeded by mech.manual_seed): an init always gets one
  local init, gen = opts.init or "zeros", opts.generator or M.generator or mech.default_generator
  local fan = opts.fan
  if type(init) == "string" then
    if init == "linear_weight" or init == "linear_bias" or init == "conv_weight" or init == "conv_bias" then
      fan = fan or default_fan(init, shape)
      if type(fan) ~= "number" or fan < 1 then
        error(string.format("mech.nn: %s: parameter '%s' with init '%s' needs option fan (the fan-in, a number >= 1)",
          where(self), name, init), 3)
      end
      local b = 1 / math.sqrt(fan)
      return uniform(shape, -b, b, gen), fan
    elseif init == "embedding" then return mech.randn(shape, { generator = gen }), nil
    elseif init == "ones" then return mech.ones(shape), nil
    elseif init == "zeros" then return mech.zeros(shape), nil
    end
  elseif type(init) == "table" and type(init.normal) == "number" then
    return mech.randn(shape, { generator = gen }) * init.normal, fan
  elseif type(init) == "table" and type(init.uniform) == "table" and #init.uniform == 2 then
    return uniform(shape, init.uniform[1], init.uniform[2], gen), fan
  elseif type(init) == "function" then
    local t = mech.zeros(shape)
    init(t, gen)
    return t, fan
  end
  error(string.format("mech.nn: %s: parameter '%s' has an unknown init %s (expected linear_weight, linear_bias, embedding, conv_weight, conv_bias, ones, zeros, {normal = std}, {uniform = {a, b}} or a function(t, gen))",
    where(self), name, type(init) == "string" and ("'" .. init .. "'") or type(init)), 3)
end

--- self:param(name, shape[, {init =, fan =, generator =}]) -> a new leaf tensor that requires grad.
function Module:param(name, shape, opts)
  if type(name) ~= "string" or not name:match("^[%w_]+$") then
    error(string.format("mech.nn: %s: param: argument 1 expected a parameter name (letters, digits, _), got %s",
      where(self), type(name) == "string" and ("'" .. name .. "'") or type(name)), 2)
  end
  if rawget(self, "_params")[name] then
    error(string.format("mech.nn: %s: parameter '%s' registered twice (each name once per module)", where(self), name), 2)
  end
  if rawget(self, "_modules")[name] then
    error(string.format("mech.nn: %s: parameter '%s' collides with the child of that name", where(self), name), 2)
  end
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or #shape == 0 then
    error(string.format("mech.nn: %s: parameter '%s' expected a shape (a table of sizes), got %s", where(self), name, type(shape)), 2)
  end
  for i, s in ipairs(shape) do
    if math.type(s) ~= "integer" and not (type(s) == "number" and s == math.floor(s)) or s < 1 then
      error(string.format("mech.nn: %s: parameter '%s' size %d expected an integer >= 1, got %s", where(self), name, i, tostring(s)), 2)
    end
  end
  opts = opts or {}
  local t, fan = make_param(self, name, shape, opts)
  t = t:detach():contiguous():requires_grad_()
  rawget(self, "_params")[name] = t
  rawget(self, "_specs")[name] = { init = opts.init or "zeros", fan = fan }
  table.insert(rawget(self, "_order"), { name = name, param = true })
  return t
end

-- Registers an existing tensor as a parameter (a built-in mixer layer's C leaves; the name may
-- hold dots: "in_proj.weight").
function Module:_adopt(name, t, spec)
  rawget(self, "_params")[name] = t
  rawget(self, "_specs")[name] = spec or { init = "model" }
  table.insert(rawget(self, "_order"), { name = name, param = true })
  return t
end

-- Visits (state name, hook-style name, owner module, local name) for every parameter, in order.
local function each_param(self, fn)
  local function walk(m)
    local params = rawget(m, "_params")
    for _, e in ipairs(rawget(m, "_order")) do
      if e.param then
        fn(join(rawget(m, "_state"), e.name), m, e.name, params[e.name])
      else
        walk(rawget(m, "_modules")[e.name])
      end
    end
  end
  walk(self)
end

-- A subtree's names are relative to its root: strip the root's own prefix.
local function relative(self, full)
  local base = rawget(self, "_state")
  if base == "" then return full end
  return full:sub(#base + 2)
end

--- self:named_parameters() -> { {state-dict name, tensor}, ... } in registration order.
function Module:named_parameters()
  local out = {}
  each_param(self, function(full, _, _, t) out[#out + 1] = { relative(self, full), t } end)
  return out
end

function Module:parameters()
  local out = {}
  each_param(self, function(_, _, _, t) out[#out + 1] = t end)
  return out
end

--- self:param_specs() -> { {name=, shape=, init=, fan=}, ... } in state order.
function Module:param_specs()
  local out = {}
  each_param(self, function(full, m, lname, t)
    local s = rawget(m, "_specs")[lname]
    out[#out + 1] = { name = relative(self, full), shape = t:shape(), init = s.init, fan = s.fan }
  end)
  return out
end

local function find_param(self, name, fn)
  local found
  each_param(self, function(full, m, lname)
    if relative(self, full) == name then found = { m, lname } end
  end)
  if not found then
    local names = {}
    each_param(self, function(full) names[relative(self, full)] = true end)
    local near = util.closest(name, names)
    error(string.format("mech.nn: %s: %s: no parameter '%s'%s", where(self), fn, tostring(name),
      near and (" (did you mean '" .. near .. "'?)") or ""), 3)
  end
  return found[1], found[2]
end

--- self:set_parameter(name, tensor): the parameter `name` (a state-dict name) becomes `tensor`.
function Module:set_parameter(name, t)
  local m, lname = find_param(self, name, "set_parameter")
  local old = rawget(m, "_params")[lname]
  if not mech.is_tensor(t) or t:dtype() ~= "float32" or not same_shape(t, old) then
    error(string.format("mech.nn: %s: set_parameter: '%s' expected a float32 tensor of shape %s, got %s", where(self),
      name, shape_str(old), mech.is_tensor(t) and ("a " .. t:dtype() .. " tensor of shape " .. shape_str(t)) or type(t)), 2)
  end
  rawget(m, "_params")[lname] = t
end

--- self:get_parameter(name) -> tensor (a state-dict name relative to self).
function Module:get_parameter(name)
  local m, lname = find_param(self, name, "get_parameter")
  return rawget(m, "_params")[lname]
end

function Module:num_params()
  local n = 0
  each_param(self, function(_, _, _, t) n = n + t:numel() end)
  return n
end

function Module:state_dict()
  local sd = {}
  each_param(self, function(full, _, _, t) sd[relative(self, full)] = t:detach() end)
  return sd
end

--- self:load_state_dict(sd): copies every tensor of sd into the parameter of that name. Every key,
--- name and shape is checked before anything changes.
function Module:load_state_dict(sd)
  if type(sd) ~= "table" then
    error(string.format("mech.nn: %s: load_state_dict: argument 1 expected a table {name = tensor}, got %s", where(self), type(sd)), 2)
  end
  local seen, plan = {}, {}
  each_param(self, function(full, m, lname, t)
    local name = relative(self, full)
    local v = sd[name]
    local at = join(rawget(m, "_path"), lname)
    if v == nil then
      error(string.format("mech.nn: %s: load_state_dict: missing '%s' (the parameter at %s, expected a tensor of shape %s)",
        where(self), name, at, shape_str(t)), 0)
    end
    if not mech.is_tensor(v) or not same_shape(v, t) then
      error(string.format("mech.nn: %s: load_state_dict: '%s' (the parameter at %s) expected a tensor of shape %s, got %s",
        where(self), name, at, shape_str(t), mech.is_tensor(v) and ("shape " .. shape_str(v)) or type(v)), 0)
    end
    seen[name] = true
    plan[#plan + 1] = { t, v }
  end)
  local keys = {}
  for k in pairs(sd) do keys[#keys + 1] = tostring(k) end
  table.sort(keys) -- the first unexpected key in sorted order: the same message on every run
  for _, k in ipairs(keys) do
    if not seen[k] then
      error(string.format("mech.nn: %s: load_state_dict: unexpected key '%s' (this tree has no such parameter%s)", where(self),
        tostring(k), (function()
          local near = util.closest(tostring(k), seen)
          return near and ("; did you mean '" .. near .. "'?") or ""
        end)()), 2)
    end
  end
  mech.no_grad(function()
    for _, pv in ipairs(plan) do pv[1]:copy_(pv[2]) end
  end)
end

function Module:zero_grad()
  each_param(self, function(_, _, _, t) t.grad = nil end)
end

--- self:apply(fn): fn(module) for every module of the tree, children first (as PyTorch).
function Module:apply(fn)
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

function Module:train(on)
  if on == nil then on = true end
  for _, m in ipairs(self:modules()) do rawset(m, "training", on and true or false) end
  return self
end

function Module:eval() return self:train(false) end

-- ------------------------------------------------------------------ printing

local function count_str(n)
  local s = tostring(n):reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (s:gsub("^,", ""))
end

--- tostring(module): the tree, with each parameter's shape and each module's parameter count.
function Module.__tostring(self)
  local lines = {}
  local function walk(m, label, indent)
    local np = m:num_params()
    lines[#lines + 1] = string.format("%s%s%s%s", indent, label and (label .. ": ") or "", class_name(m),
      np > 0 and ("  (" .. count_str(np) .. " parameters)") or "")
    for _, e in ipairs(rawget(m, "_order")) do
      if e.param then
        lines[#lines + 1] = string.format("%s  %s %s", indent, e.name, shape_str(rawget(m, "_params")[e.name]))
      else
        walk(rawget(m, "_modules")[e.name], e.name, indent .. "  ")
      end
    end
  end
  walk(self, nil, "")
  return table.concat(lines, "\n")
end

return M
