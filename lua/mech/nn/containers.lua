-- nn.Sequential(m1, m2, ...) runs its modules in turn; nn.ModuleList({m1, ...}) holds them. Both
-- name their children 0, 1, ... (the paths "blocks.0", "blocks.1"), index 0-based: list[0], #list.
local nn = require "mech.nn.module"

local function check_list(fn, list)
  for i, m in ipairs(list) do
    if not nn.is_module(m) then error(string.format("%s: element %d expected a module, got %s", fn, i, type(m)), 4) end
  end
end

local ModuleList = nn.Module:extend("ModuleList")

function ModuleList:init(list)
  if list ~= nil and type(list) ~= "table" or nn.is_module(list) then
    error("mech.nn.ModuleList: argument 1 expected a list of modules, got " .. (nn.is_module(list) and "a module" or type(list)), 3)
  end
  check_list("mech.nn.ModuleList", list or {})
  for _, m in ipairs(list or {}) do self:append(m) end
end

--- list:append(module): adds it as the next index.
function ModuleList:append(m)
  if not nn.is_module(m) then error("mech.nn.ModuleList:append: argument 1 expected a module, got " .. type(m), 2) end
  self:add_module(tostring(#self), m)
  return self
end

function ModuleList:forward()
  error(string.format("mech.nn: %s has no forward (a ModuleList holds modules; call them in your own forward)", nn.where(self)), 2)
end

ModuleList.__len = function(self) return #rawget(self, "_order") end

local Sequential = nn.Module:extend("Sequential")

function Sequential:init(...)
  local list = { ... }
  if #list == 1 and type(list[1]) == "table" and not nn.is_module(list[1]) then list = list[1] end
  check_list("mech.nn.Sequential", list)
  for i, m in ipairs(list) do self:add_module(tostring(i - 1), m) end
end

function Sequential:forward(x)
  for _, m in ipairs(self:children()) do x = m(x) end
  return x
end

Sequential.__len = ModuleList.__len

return { ModuleList = ModuleList, Sequential = Sequential }
