-- Hooks on trees of mech.nn modules, the TransformerLens way (docs/nn.md): every site's name
-- (hook_names), a run with hooks or a cache (run_with_hooks, run_with_cache), persistent hooks
-- (add_hook, reset_hooks), and HookPoint, a named point inside a forward. A run pushes one hook
-- context (mech.nn.hook_context) whose fire calls the Lua hooks.
local mech = _G.mech
local util = require "mech.util"
local context = require "mech.nn.hook_context"
local M = require "mech.nn.class"

local Module, where, join, is_module = M.Module, M.where, M._join, M.is_module

--- Sites a module fires inside its forward other than its children's (names relative to it);
--- a built-in mixer layer lists its C sites here.
function Module:internal_sites() return {} end

--- self:hook_names() -> every hook site of the tree, in tree order (module outputs and HookPoints).
function Module:hook_names()
  local out, seen = {}, {}
  for _, m in ipairs(self:modules()) do
    local p = rawget(m, "_path")
    local names = {}
    if m ~= self and p ~= "" then names[1] = p end
    for _, s in ipairs(m:internal_sites()) do names[#names + 1] = join(p, s) end
    for _, n in ipairs(names) do
      if seen[n] then error(string.format("mech.nn: %s: the hook name '%s' names two sites", where(self), n), 2) end
      seen[n] = true
      out[#out + 1] = n
    end
  end
  return out
end

-- The tree's hook names as a set (for did-you-mean).
local function site_set(self)
  local names = {}
  for _, n in ipairs(self:hook_names()) do names[n] = true end
  return names
end

-- A literal filter, the built-in model's rule (ml_site_literal_match, src/nn/sites.c): `lit` is a
-- whole run of the name's dot-separated parts (the full name, "blocks.0", a component in every
-- layer), and the last part may leave off TransformerLens's "hook_". A typo ("hook_resid_pr")
-- matches nothing.
local function literal_match(name, lit)
  if lit == "" then return false end
  local l = "." .. lit .. "."
  if ("." .. name .. "."):find(l, 1, true) then return true end
  local head, last = name:match("^(.-)hook_([^.]*)$")
  return head ~= nil and (head == "" or head:sub(-1) == ".") and ("." .. head .. last .. "."):find(l, 1, true) ~= nil
end

-- A name filter: a name or a run of its parts (literal), {pattern = a Lua pattern} matched
-- anywhere, a list of names, or a function(name). A name that selects no site is an error.
local function filter_fn(f, fn, self)
  if f == nil then return function() return true end end
  if type(f) == "function" then return f end
  local function literal(lit)
    local any = false
    for _, n in ipairs(self:hook_names()) do any = any or literal_match(n, lit) end
    if not any then
      local near = util.closest(lit, site_set(self))
      error(string.format("mech.nn: %s: %s: option names: no hook site '%s'%s (a name is literal; {pattern = \"...\"} for a Lua pattern)",
        where(self), fn, lit, near and (" (did you mean '" .. near .. "'?)") or ""), 4)
    end
    return function(n) return literal_match(n, lit) end
  end
  if type(f) == "string" then return literal(f) end
  if type(f) == "table" and type(f.pattern) == "string" then
    local pat = f.pattern
    return function(n)
      local ok, found = pcall(string.find, n, pat)
      if not ok then
        error(string.format("mech.nn: %s: %s: option names: bad Lua pattern '%s': %s", where(self), fn, pat, found), 0)
      end
      return found ~= nil
    end
  end
  if type(f) == "table" then
    local keeps = {}
    for i, n in ipairs(f) do
      if type(n) ~= "string" then
        error(string.format("mech.nn: %s: %s: option names expected a list of names, got a %s at index %d", where(self), fn,
          type(n), i), 3)
      end
      keeps[i] = literal(n)
    end
    return function(n)
      for _, k in ipairs(keeps) do if k(n) then return true end end
      return false
    end
  end
  error(string.format("mech.nn: %s: %s: option names expected a name, {pattern = a Lua pattern}, a list of names or a function, got %s",
    where(self), fn, type(f)), 3)
end

-- A hook name given to add_hook / run_with_hooks: one of hook_names() or a filter function.
local function check_hook_name(self, name, fn)
  if type(name) == "function" then return name end
  if type(name) ~= "string" then
    error(string.format("mech.nn: %s: %s: a hook name expected a string or a function(name), got %s", where(self), fn, type(name)), 3)
  end
  local names = site_set(self)
  if not names[name] then
    local near = util.closest(name, names)
    error(string.format("mech.nn: %s: %s: no hook site '%s'%s", where(self), fn, name,
      near and (" (did you mean '" .. near .. "'?)") or ""), 3)
  end
  return function(n) return n == name end
end

-- Runs self(...) with a context that calls `hooks` ({ {match, fn}, ... }) and the persistent ones.
local function run_hooked(self, args, nargs, hooks)
  local persistent = rawget(self, "_hooks") or {}
  local all = {}
  for _, h in ipairs(persistent) do all[#all + 1] = h end
  for _, h in ipairs(hooks) do all[#all + 1] = h end
  context.push_context({
    fire = function(path, t)
      for _, h in ipairs(all) do
        if h[1](path) then
          local r = h[2](t, path)
          if r ~= nil then t = r end
        end
      end
      return t
    end,
    wants = function(path)
      for _, h in ipairs(all) do
        if h[1](path) then return true end
      end
      return false
    end,
  })
  rawset(self, "_hooking", true)
  local ok, a, b = pcall(function() return self(table.unpack(args, 1, nargs)) end)
  rawset(self, "_hooking", nil)
  context.pop_context()
  if not ok then error(a, 0) end
  return a, b
end
M._run_hooked = run_hooked

--- self:run_with_hooks(x..., {fwd_hooks = {{name, fn}, ...}}) or (x..., {[name] = fn}) -> output;
--- fn(act, name) returns nil (observe) or a replacement of the same shape.
function Module:run_with_hooks(...)
  local n = select("#", ...)
  local args = { ... }
  local opts = args[n]
  if type(opts) ~= "table" or is_module(opts) or mech.is_tensor(opts) then
    error(string.format("mech.nn: %s: run_with_hooks: the last argument expected {fwd_hooks = {{name, fn}, ...}}, got %s",
      where(self), mech.is_tensor(opts) and "a tensor" or type(opts)), 2)
  end
  local hooks = {}
  for k, fn in pairs(opts) do -- the built-in model's form: {[name] = fn}
    if k ~= "fwd_hooks" then
      if type(fn) ~= "function" then
        error(string.format("mech.nn: %s: run_with_hooks: the hook for %s expected a function(act, name), got %s", where(self),
          tostring(k), type(fn)), 2)
      end
      hooks[#hooks + 1] = { check_hook_name(self, k, "run_with_hooks"), fn }
    end
  end
  for i, h in ipairs(opts.fwd_hooks or {}) do
    if type(h) ~= "table" or type(h[2]) ~= "function" then
      error(string.format("mech.nn: %s: run_with_hooks: fwd_hooks[%d] expected {name, function(act, name)}", where(self), i), 2)
    end
    hooks[#hooks + 1] = { check_hook_name(self, h[1], "run_with_hooks"), h[2] }
  end
  return run_hooked(self, args, n - 1, hooks)
end

--- self:run_with_cache(x...[, {names = filter}]) -> output, cache ({name = activation}).
function Module:run_with_cache(...)
  local n = select("#", ...)
  local args = { ... }
  local opts = args[n]
  if type(opts) == "table" and not is_module(opts) and not mech.is_tensor(opts) then n = n - 1 else opts = {} end
  local keep = filter_fn(opts.names, "run_with_cache", self)
  local cache = {}
  local out = run_hooked(self, args, n, { { keep, function(t, name) cache[name] = t:detach() end } })
  return out, cache
end

--- self:add_hook(name, fn): a hook every later call of self runs (until reset_hooks); returns a
--- handle with :remove().
function Module:add_hook(name, fn)
  local match = check_hook_name(self, name, "add_hook")
  if type(fn) ~= "function" then
    error(string.format("mech.nn: %s: add_hook: argument 2 expected a function(act, name), got %s", where(self), type(fn)), 2)
  end
  local hooks = rawget(self, "_hooks")
  if not hooks then
    hooks = {}
    rawset(self, "_hooks", hooks)
  end
  local h = { match, fn }
  hooks[#hooks + 1] = h
  return { remove = function()
    for i, x in ipairs(hooks) do
      if x == h then table.remove(hooks, i) return end
    end
  end }
end

function Module:reset_hooks() rawset(self, "_hooks", nil) end

local HookPoint = Module:extend("HookPoint")
M.HookPoint = HookPoint
function HookPoint:forward(x) return x end

return M
