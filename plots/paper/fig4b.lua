-- Fig. 4b: ATR, box plots of Attrib at the layer-1 block input by architecture; rows @Key,
-- @Query, @Value, columns the three settings; every run (all learning rates) of the main curves
-- that passes the 0.01 filter (spec §6.7).
--   mechlab plots/paper/fig4b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig4b", sweeps = { "atr_easy", "atr_hard" }, title = "ATR: Attrib at the layer-1 block input" }

function recipe.draw(dirs, out)
  local easy, hard = paper.results(dirs, "atr_easy"), paper.results(dirs, "atr_hard")
  local function main(preset) return function(r) return paper.task_is(r, preset) and paper.main_curve(r) end end
  return paper.attrib_boxes({
    { title = "(5, 20)", rows = easy, where = main("pcfg_5_20") },
    { title = "(5, 8192)", rows = hard, where = main("pcfg_easy_8192") },
    { title = "(10, 20)", rows = hard, where = main("pcfg_10_20") },
  }, { "key", "query", "value" }, out, { title = "ATR, key corrupted, layer-1 block input",
    caption = "runs passing the 0.01 filter at the panel's position; fewer than 5 runs: their points, no box; shape: width d" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
