-- Fig. 4b: ATR, box plots of Attrib at the layer-1 block input by architecture; rows @Key,
-- @Query, @Value, columns the three settings; every run (all learning rates) of the main curves
-- that passes the 0.01 filter (spec §6.7). A setting of `atr_hard` reads its quick32 runs (32
-- epochs) once they cover all its runs (as Fig. 4a does).
--   mechlab plots/paper/fig4b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig4b", sweeps = { "atr_easy", "atr_hard" }, title = "ATR: Attrib at the layer-1 block input",
  slices = { quick = { atr_hard = { "quick32" } } } }

function recipe.draw(dirs, out)
  local easy, hard = paper.results(dirs, "atr_easy"), paper.results(dirs, "atr_hard")
  local settings = paper.atr_settings(easy, hard)
  for _, st in ipairs(settings) do st.where = paper.main_curve end
  return paper.attrib_boxes(settings, { "key", "query", "value" }, out, { title = "ATR, key corrupted, layer-1 block input",
    caption = "runs passing the 0.01 filter at the panel's position; fewer than 5 runs: their points, no box; shape: width d" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
