-- Fig. 8b: ATR (5, 20) with 1 layer and with 2, accuracy against width at the best learning rate;
-- facets by depth (positions for Attention only).
--   mechlab plots/paper/fig8b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig8b", sweeps = { "atr_easy", "atr_1layer" }, title = "ATR (5, 20): 1 vs 2 layers (best LR)" }

function recipe.draw(dirs, out)
  return paper.depth_figure(paper.rows(dirs, { "atr_easy", "atr_1layer" }), { 1, 2 }, out, { title = "ATR (5, 20)" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
