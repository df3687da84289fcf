-- Fig. 10: sibling queries, accuracy against width at the best learning rate; facets 1, 2 and 3
-- layers (positions for Attention only).
--   mechlab plots/paper/fig10.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig10", sweeps = { "sibling" }, title = "Sibling queries by depth (best LR)" }

function recipe.draw(dirs, out)
  return paper.depth_figure(paper.results(dirs, "sibling"), { 1, 2, 3 }, out, { title = "Sibling" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
