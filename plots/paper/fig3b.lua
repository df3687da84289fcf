-- Fig. 3b: AR, one point per run that passes the 0.01 filter (every learning rate): Attrib @ Value
-- against Attrib @ Query at the layer-1 block input (spec §6.7).
--   mechlab plots/paper/fig3b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig3b", sweeps = { "ar" }, title = "AR: Attrib @ Value vs @ Query, layer-1 block input",
  -- the quick profile has one learning rate; its slice (profile lr_slice) adds three, and
  -- profile mamba_256 Mamba at the paper's d = 256
  slices = { quick = { ar = { "lr_slice", "mamba_256" } } } }

function recipe.draw(dirs, out)
  return paper.ar_attrib_scatter(paper.results(dirs, "ar"), "value", "query", out)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
