-- Fig. 3c: AR, one point per run that passes the 0.01 filter (every learning rate): Attrib @ Query
-- against Attrib @ Key at the layer-1 block input (spec §6.7).
--   mechlab plots/paper/fig3c.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig3c", sweeps = { "ar" }, title = "AR: Attrib @ Query vs @ Key, layer-1 block input",
  -- the quick profile has one learning rate; its slice (profile lr_slice) adds three, and
  -- profile mamba_256 Mamba at the paper's d = 256
  slices = { quick = { ar = { "lr_slice", "mamba_256" } } } }

function recipe.draw(dirs, out)
  return paper.ar_attrib_scatter(paper.results(dirs, "ar"), "query", "key", out)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
