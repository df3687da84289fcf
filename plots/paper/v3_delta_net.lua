-- v3 (spec §9.1): AR accuracy against width at the best learning rate, the six architectures'
-- main curves with DeltaNet (no positions) beside them.
--   mechlab plots/paper/v3_delta_net.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "v3_delta_net", sweeps = { "ar", "delta_net" }, title = "v3: AR with DeltaNet (best LR)" }

function recipe.draw(dirs, out)
  local best, widths, archs = paper.accuracy_figure(paper.rows(dirs, { "ar", "delta_net" }), out, {
    title = "AR with DeltaNet", where = function(r) return r.arch == "delta_net" or paper.main_curve(r) end, dodge = 6,
    caption = "overlapping points moved apart along x, centred on their width" })
  return paper.accuracy_keys(best, widths, archs)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
