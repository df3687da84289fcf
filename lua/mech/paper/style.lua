--- The paper's figure style (docs/figures.md): names, the order of architectures, and each
--- architecture's Set2 colour and marker. Part of mech.paper.
local suite = require "mech.paper.suite"

local style = {}

local arch_names = { attention = "Attention", hyena = "Hyena", base_conv = "BaseConv", based = "Based", h3 = "H3",
  mamba = "Mamba", delta_net = "DeltaNet" }
function style.arch_name(a) return arch_names[a] or a end

-- The positions' names in figure titles and axes.
local position_names = { value = "Value", query = "Query", key = "Key", next_key = "Next key" }
function style.position_name(pos) return position_names[pos] or pos end

local arch_order = {}
for i, a in ipairs(suite.archs) do arch_order[a] = i end
arch_order.delta_net = #suite.archs + 1

--- Architectures in the paper's order, other keys (numbers, strings) in their natural order.
function style.key_less(x, y)
  local ox, oy = arch_order[x], arch_order[y]
  if ox or oy then return (ox or 99) < (oy or 99) end
  if type(x) == type(y) then return x < y end
  return type(x) == "number"
end

-- Each architecture's Set2 colour and marker, fixed by the paper's order, so that an architecture
-- looks the same in every figure, whichever others are present.
local arch_markers = { "circle", "triangle", "square", "diamond", "triangle_down", "plus", "cross" }

--- The colour and marker of an architecture (nil for other line keys: the figure's palette).
function style.arch_style(a)
  local i = arch_order[a]
  if i then return mech.plot.color("set2", i - 1), arch_markers[i] end
end

--- The colour and marker of Mamba's short-conv width k (0 none ... 4 the default): one Blues
--- shade and one marker each, the same in every figure of the conv ablation.
function style.conv_style(k)
  k = math.tointeger(tonumber(k))
  if k and k >= 0 and k <= 4 then return mech.plot.color("blues", k, 5), arch_markers[k + 1] end
end

--- Sorts a list of architectures (or other line keys) into the paper's order, in place.
function style.sort_keys(list) table.sort(list, style.key_less); return list end

return style
