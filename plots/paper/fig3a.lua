-- Fig. 3a: AR accuracy against width at the best learning rate per (architecture, width); the
-- paper's main curves pair Attention with learned positions with every other architecture
-- without.   mechlab plots/paper/fig3a.lua DIR [OUT.png]
local paper = require "mech.paper"
local sweep = require "mech.sweep"

local recipe = { id = "fig3a", sweeps = { "ar" }, title = "AR accuracy vs width (best LR)" }

function recipe.draw(dirs, out)
  local best, widths, archs = paper.accuracy_figure(sweep.results(dirs.ar), out, { title = "AR", where = paper.main_curve })
  return paper.accuracy_keys(best, widths, archs)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
