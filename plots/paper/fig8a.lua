-- Fig. 8a: AR with 1 layer and with 2, accuracy against width at the best learning rate; facets
-- by depth (positions for Attention only).
--   mechlab plots/paper/fig8a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig8a", sweeps = { "ar", "ar_layers" }, title = "AR: 1 vs 2 layers (best LR)" }

function recipe.draw(dirs, out)
  return paper.depth_figure(paper.rows(dirs, { "ar", "ar_layers" }), { 1, 2 }, out, { title = "AR" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
