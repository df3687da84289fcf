-- Fig. 9a: AR with 1, 2 and 3 layers, accuracy against width at the best learning rate; facets by
-- depth (positions for Attention only).
--   mechlab plots/paper/fig9a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig9a", sweeps = { "ar", "ar_layers" }, title = "AR: 1, 2 and 3 layers (best LR)" }

function recipe.draw(dirs, out)
  return paper.depth_figure(paper.rows(dirs, { "ar", "ar_layers" }), { 1, 2, 3 }, out, { title = "AR" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
