-- Argument checks the layers share: errors name the layer's constructor and the argument; and the
-- shape tests and texts of the messages about tensors (a hook's replacement, a parameter).
local C = {}

--- "[2,3]": a tensor's shape as messages write it.
function C.shape_str(t) return "[" .. table.concat(t:shape(), ",") .. "]" end

--- Whether tensors a and b have the same shape.
function C.same_shape(a, b)
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do
    if sa[i] ~= sb[i] then return false end
  end
  return true
end

function C.size(fn, what, v)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v) and v < 2 ^ 53) or v < 1 then
    error(string.format("%s: %s expected an integer >= 1, got %s", fn, what, tostring(v)), 4)
  end
  return math.tointeger(v)
end

function C.opts(fn, arg, v, allowed)
  if v == nil then return {} end
  if type(v) ~= "table" then error(string.format("%s: argument %d expected an options table, got %s", fn, arg, type(v)), 4) end
  local set = {}
  for _, k in ipairs(allowed) do set[k] = true end
  for k in pairs(v) do
    if not set[k] then
      error(string.format("%s: argument %d has an unknown option '%s' (expected %s)", fn, arg, tostring(k), table.concat(allowed, ", ")), 4)
    end
  end
  return v
end

function C.number(fn, what, v, def)
  if v == nil then return def end
  if type(v) ~= "number" or v ~= v or v <= 0 then error(string.format("%s: %s expected a number > 0, got %s", fn, what, tostring(v)), 4) end
  return v
end

return C
