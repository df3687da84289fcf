-- mech.pp: formats values for printing, as the REPL shows results. tostring for everything
-- (so tensors show their summary) except plain tables, which are shown compactly with a
-- bounded depth (2) and length (30 items); values are separated by tabs.
--   local pp = require('mech.pp'); print(pp.format({1, 2, x = 'a'}))  --> {1, 2, x = "a"}
local maxdepth, maxitems = 2, 30
local kw = {}
for w in ('and break do else elseif end false for function goto if in local nil not or '
  .. 'repeat return then true until while'):gmatch('%a+') do kw[w] = true end
local function quote(s) return (('%q'):format(s):gsub('\\\n', '\\n')) end
local function plain(v)
  if type(v) ~= 'table' then return false end
  local mt = getmetatable(v)
  return not (type(mt) == 'table' and rawget(mt, '__tostring'))
end
local function keyorder(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == 'number' or ta == 'string' then return a < b end
  return tostring(a) < tostring(b)
end
local fmt
local function fmttable(t, depth, seen)
  if next(t) == nil then return '{}' end
  if seen[t] then return '<cycle>' end
  if depth >= maxdepth then return '{...}' end
  seen[t] = true
  local parts, len = {}, rawlen(t)
  for i = 1, math.min(len, maxitems) do parts[#parts + 1] = fmt(rawget(t, i), depth + 1, seen) end
  local keys = {}
  for k in next, t do
    if not (math.type(k) == 'integer' and k >= 1 and k <= len) then keys[#keys + 1] = k end
  end
  table.sort(keys, keyorder)
  for i = 1, math.min(#keys, maxitems - #parts) do
    local k = keys[i]
    local ks = (type(k) == 'string' and k:match('^[%a_][%w_]*$') and not kw[k]) and k
      or '[' .. fmt(k, depth + 1, seen) .. ']'
    parts[#parts + 1] = ks .. ' = ' .. fmt(rawget(t, k), depth + 1, seen)
  end
  local rest = len + #keys - #parts
  if rest > 0 then parts[#parts + 1] = '... (' .. rest .. ' more)' end
  seen[t] = nil
  return '{' .. table.concat(parts, ', ') .. '}'
end
fmt = function(v, depth, seen)
  if plain(v) then return fmttable(v, depth, seen) end
  if depth == 0 then return tostring(v) end
  if type(v) == 'string' then return quote(v) end
  local s = tostring(v)
  local first = s:match('^[^\n]*')
  return #first < #s and first .. ' ...' or s
end
local M = {}

-- The arguments formatted and joined by tabs; values nested in a table show only their first line.
function M.format(...)
  local out = {}
  for i = 1, select('#', ...) do out[i] = fmt((select(i, ...)), 0, {}) end
  return table.concat(out, '\t')
end

return M
