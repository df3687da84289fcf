-- v3 (spec §9.3): Mamba on ATR (5, 20) by short-conv width 0 … 4, box plots of Attrib at the
-- layer-1 block input (facets @Key, @Query, @Value; the 0.01 filter). The expected signature
-- without the conv: high Attrib @ Value (induction). The key lines add the accuracy per width.
--   mechlab plots/paper/v3_atr_mamba_conv.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "v3_atr_mamba_conv", sweeps = { "atr_easy", "atr_mamba_conv" },
  title = "v3: Mamba on ATR (5, 20): Attrib by conv width" }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "atr_easy", "atr_mamba_conv" })
  local function mamba(r) return r.arch == "mamba" and not r.pos_emb end
  local conv = paper.mamba_conv
  local keys = paper.attrib_boxes({ { rows = rows, where = mamba } }, { "key", "query", "value" }, out, {
    title = "Mamba, ATR (5, 20), layer 1 block input", ncol = 3, group = conv,
    name = function(k) return "conv " .. k end, style = paper.conv_style, width = 640, height = 300 })
  local best, widths, convs = paper.best_per_width(rows, { where = mamba, group = conv })
  for _, k in ipairs(paper.accuracy_keys(best, widths, convs, function(k) return "accuracy, d_conv " .. k end)) do
    keys[#keys + 1] = k
  end
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
