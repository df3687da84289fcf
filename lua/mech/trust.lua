--- Which modules a file may name (docs/security.md). A checkpoint names the module of its Lua
--- mixer and of its Lua task; reading it must not run code the user did not choose. A module is
--- used when it is mechlab's own (lua/mech/, where require finds it), when the user's code has
--- already loaded it (package.loaded), when the user allowed it for
--- one call ({modules = {...}} of mech.load, mech.task.from_checkpoint, mech.task.from_spec;
--- --allow-module of experiments/interchange.lua), or for the whole process (mech.allow_module).
--- Nothing a file holds ever allows a module.
local M = {}

local allowed = {} -- modules allowed by mech.allow_module, for this process

local function check_name(name, fn, what)
  if type(name) ~= "string" or not name:match("^[%w_][%w_%.%-]*$") or #name > 127 then
    error(string.format("%s: %s expected a module name (letters, digits, '_', '.', '-'), got %s", fn, what,
      type(name) == "string" and ("'" .. name .. "'") or type(name)), 0)
  end
end

--- mech.allow_module(name | {name, ...}): lets every later load in this process use these modules
--- when a file names them (the user's decision, as writing `require(name)` would be).
function M.allow_module(names)
  local fn = "mech.allow_module"
  local list = type(names) == "table" and names or { names }
  if #list == 0 then check_name(nil, fn, "argument 1") end
  for i, name in ipairs(list) do check_name(name, fn, type(names) == "table" and ("entry " .. i) or "argument 1") end
  for _, name in ipairs(list) do allowed[name] = true end
end

--- The set of a call's `modules` option (a list of names, or nil), checked.
function M.set(list, fn)
  local set = {}
  if list == nil then return set end
  if type(list) ~= "table" then
    error(string.format("%s: option 'modules': expected a list of module names, got %s", fn, type(list)), 0)
  end
  for i, name in ipairs(list) do
    check_name(name, fn, "option 'modules' entry " .. i)
    set[name] = true
  end
  return set
end

-- mechlab's own Lua library: the directory this file's lua/mech/ sits in.
local own_dir = (debug.getinfo(1, "S").source:match("^@(.*)/mech/trust%.lua$"))

-- Is `name` a module of mechlab's own library, the file require would load? (mechlab's code is
-- trusted; its modules' functions are still no tasks unless registered as such)
local function own(name)
  if not own_dir or not name:match("^mech%.") then return false end
  local mine = package.searchpath(name, own_dir .. "/?.lua;" .. own_dir .. "/?/init.lua")
  return mine ~= nil and package.searchpath(name, package.path) == mine
end

--- May a file's `name` be required? (mechlab's own modules, a call's set, the process's allowances)
function M.allowed(name, set) return (set and set[name]) or allowed[name] or own(name) end

--- The refusal: names the module, what named it, and the ways to allow it.
function M.refusal(what, name)
  return string.format("%s names module '%s', which this process has not loaded; a file may only name a "
    .. "module you allow: pass {modules = {\"%s\"}}, call mech.allow_module(\"%s\"), or require it first "
    .. "(docs/security.md)", what, name, name, name)
end

return M
