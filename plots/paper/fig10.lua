-- Fig. 10: sibling queries, accuracy against width at the best learning rate; facets 1, 2 and 3
-- layers (positions for Attention only). The y axis starts below the lowest line, not at 0: every
-- line lies between 0.7 and 0.97, where 0-1.05 would leave them a few pixels apart.
--   mechlab plots/paper/fig10.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig10", sweeps = { "sibling" }, title = "Sibling queries by depth (best LR)" }

function recipe.draw(dirs, out)
  return paper.depth_figure(paper.results(dirs, "sibling"), { 1, 2, 3 }, out, { title = "Sibling", zoom = true })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
