-- Fig. 5c: ATR split, box plots of Attrib at the layer-1 block input by architecture; rows
-- @Value, @Query, @Key, columns dev | test; no filter, y range −0.5 … 1.75 (spec §6.7).
--   mechlab plots/paper/fig5c.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig5c", sweeps = { "atr_split" }, title = "ATR split: Attrib at the layer-1 block input, dev and test" }

function recipe.draw(dirs, out)
  local rows = paper.results(dirs, "atr_split")
  return paper.attrib_boxes({ { title = "dev", rows = rows, split = "dev" }, { title = "test", rows = rows, split = "test" } },
    { "value", "query", "key" }, out, { title = "ATR split, layer 1 block input", threshold = false, free_y = false,
    ylim = { -0.5, 1.75 } })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
