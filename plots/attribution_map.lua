-- The patching map of one run (paper Fig. 3-style, every component instead of block_input only):
-- attribution (paper Eq. 3, ratio of means) for each layer × component at each patched position,
-- with one item corrupted, read from an interchange CSV on disk (experiments/interchange.lua or
-- the training evaluator's metrics.csv; the last step present is used). The output's extension
-- picks PNG, SVG or PDF; the drawing is mech.interp.plot_map's, as for mech.interp.patching_map's
-- maps. Cells that fail the paper's filter (spec §6.7: mean original − mean corrupted
-- restored probability, `attrib_den`, above 0.01) are hatched: their attribution divides by a
-- near-zero effect. `filter=none` turns that off, `filter=0.05` changes the threshold.
--   mechlab plots/attribution_map.lua out.png results.csv [corrupt=query_item_orig] [title=...] [filter=0.01]
local csv = require "mech.csv"

local out, path = arg and arg[1], arg and arg[2]
if not (out and path) then
  error("usage: attribution_map.lua out.png results.csv [corrupt=query_item_orig|target_item_orig] [title=...] [filter=0.01|none]")
end
local opts = { corrupt = "query_item_orig", title = nil, filter = "0.01" }
for i = 3, #arg do
  local k, v = arg[i]:match("^(%w+)=(.*)$")
  if not k or not (k == "corrupt" or k == "title" or k == "filter") then
    error("attribution_map.lua: unknown argument '" .. arg[i] .. "'")
  end
  opts[k] = v
end
local min_den = opts.filter ~= "none" and (tonumber(opts.filter) or error("attribution_map.lua: filter must be a number or 'none', got '" .. opts.filter .. "'"))

-- the last step's `.attrib` values: {layer}.{TYPE}.{corrupt}.{position}.{component}.attrib
local rows, last = csv.read_metrics(path), -1
for _, r in ipairs(rows) do
  if r.metric:match("%.attrib$") and r.step > last then last = r.step end
end
if last < 0 then error("attribution_map.lua: no '.attrib' metrics in " .. path) end
local value, den, layers, comps, type_name = {}, {}, {}, {}, nil
local comp_order = { "block_input", "attention_input", "attention_output", "mlp_input", "mlp_output", "block_output" }
for _, r in ipairs(rows) do
  local layer, T, corrupt, pos, comp = r.metric:match("^(%d+)%.(%u+)%.([%w_]+)%.([%w_]+)%.([%w_%.]+)%.attrib$")
  if r.step == last and layer and corrupt == opts.corrupt then
    layer = tonumber(layer)
    type_name = T
    value[layer .. "/" .. comp .. "/" .. pos] = r.value
    layers[layer], comps[comp] = true, true
  end
end
-- the filter's denominator per label: `.attrib_den` (sweep results), else the interchange CSV's
-- original and corrupted restored probabilities of the same label
local restored = {}
for _, r in ipairs(rows) do
  if r.step == last then
    local layer, corrupt, pos, comp = r.metric:match("^(%d+)%.%u+%.([%w_]+)%.([%w_]+)%.([%w_%.]+)%.attrib_den$")
    if layer and corrupt == opts.corrupt then den[layer .. "/" .. comp .. "/" .. pos] = r.value end
    local which, rest = r.metric:match("^(%a+)%.(%u+%.[%w_%.]+)%.restored_prob$")
    if which == "original" or which == "corrupted" then restored[which .. "." .. rest] = r.value end
  end
end
if not type_name then error("attribution_map.lua: no attributions with the '" .. opts.corrupt .. "' item corrupted") end

local positions = { { "query_item_orig", "key" }, { "target_item_orig", "value" }, { "next_key", "next key" },
  { "divider", "divider" }, { "query_item", "query" }, { "target_item", "answer" } }
local cols, labels = {}, {}
for _, p in ipairs(positions) do
  for k in pairs(value) do
    if k:sub(-#p[1] - 1) == "/" .. p[1] then cols[#cols + 1], labels[#labels + 1] = p[1], p[2]; break end
  end
end
local function den_of(l, comp, pos)
  local d = den[l .. "/" .. comp .. "/" .. pos]
  if d then return d end
  local rest = string.format("%s.%s.%s.%s", type_name, opts.corrupt, pos, comp)
  local o, c = restored["original." .. rest], restored["corrupted." .. rest]
  return o and c and o - c or 0 / 0
end
-- the layers present, in order; an index past the layers the data holds (a file from elsewhere
-- saying layer 300000000) is an error, not a loop over that many rows
local ylabels, data, dens = {}, {}, {}
local layer_list = {}
for l in pairs(layers) do layer_list[#layer_list + 1] = l end
table.sort(layer_list)
local max_layers = 1024
for _, l in ipairs(layer_list) do
  if l >= max_layers or l >= #layer_list * 64 then
    error(string.format("attribution_map.lua: %s holds layer %d, beyond the %d layers its data covers (at most %d)",
      path, l, #layer_list, max_layers))
  end
end
for _, l in ipairs(layer_list) do
  for _, comp in ipairs(comp_order) do
    if comps[comp] then
      local row, drow = {}, {}
      for j, pos in ipairs(cols) do
        row[j] = value[l .. "/" .. comp .. "/" .. pos] or 0 / 0
        drow[j] = den_of(l, comp, pos)
      end
      ylabels[#ylabels + 1], data[#data + 1], dens[#dens + 1] = string.format("layer %d %s", l, comp), row, drow
    end
  end
end

local corrupted = opts.corrupt == "query_item_orig" and "key" or "value"
mech.interp.plot_map({ values = data, row_labels = ylabels, col_labels = labels, dens = dens, threshold = min_den,
    filter_note = min_den and string.format("fails the filter: original − corrupted restored probability ≤ %g", min_den) },
  { out = out, title = opts.title or string.format("Attribution, %s corrupted (%s, step %d)", corrupted, type_name, last) })
print("wrote " .. out)
