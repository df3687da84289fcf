--- Which tensors an optimizer or clip_grad_norm is given (src/lua/optim.c calls these): a list of
--- tensors, a mech.Model, a module with :named_parameters() or :parameters(), or for mech.optim.adamw
--- and sgd a list of parameter groups {params = ..., lr = ...}. Each tensor gets a label that
--- error messages name ("argument 1 group 2 params parameter 'w'").
local describe = require("mech.show").value

local P = {}

-- The method giving the parameters of v (a table, a mech.Model or an optimizer), or nil.
local function param_method(v)
  local mt = type(v) == "userdata" and getmetatable(v)
  if type(v) ~= "table" and not (mt and (mt.__name == "mech.Model" or mt.__name == "mech.Optimizer")) then return nil end
  for _, name in ipairs({ "named_parameters", "parameters" }) do
    if type(v[name]) == "function" then return v[name] end
  end
end

--- A list of groups: a table, not itself a module, whose first element is a table that is not a module.
function P.is_group_list(v)
  return type(v) == "table" and not param_method(v) and type(v[1]) == "table" and not param_method(v[1])
end

--- Appends the tensors of v to `list` and their labels to `labels`: a tensor (if allow_single), a
--- list of tensors, or an object whose method gives {name, tensor} pairs, a list, or a name -> tensor
--- map (in the order of the sorted names, so the order is fixed).
function P.collect(v, list, labels, fn, where, allow_single)
  local function put(t, label)
    if t == nil then error(("%s: %s expected a tensor, got nil"):format(fn, label), 0) end
    list[#list + 1], labels[#labels + 1] = t, label
  end
  local method = param_method(v)
  if allow_single and mech.is_tensor(v) then
    put(v, where)
  elseif method then
    local res = method(v)
    if type(res) ~= "table" then
      error(("%s: %s: its parameters method returned %s, expected a list of tensors"):format(fn, where, describe(res)), 0)
    end
    if #res > 0 then
      for i = 1, #res do
        local e = res[i]
        if type(e) == "table" then
          local name = (type(e[1]) == "string" or type(e[1]) == "number") and tostring(e[1]) or "?"
          put(e[2], ("%s parameter '%s'"):format(where, name))
        else
          put(e, ("%s parameter %d"):format(where, i - 1))
        end
      end
    else
      local names = {}
      for k in pairs(res) do
        if type(k) == "string" then names[#names + 1] = k end
      end
      table.sort(names)
      for _, k in ipairs(names) do put(res[k], ("%s parameter '%s'"):format(where, k)) end
    end
  elseif type(v) == "table" then
    for i = 1, #v do put(v[i], ("%s element %d"):format(where, i)) end
  else
    error(("%s: %s expected a list of tensors, a mech.Model or a module with :parameters(), got %s"):format(fn, where,
      describe(v)), 0)
  end
end

return P
