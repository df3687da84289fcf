-- Fig. 6a: Mamba on AR, accuracy against width at the best learning rate, one line per short-conv
-- width 0 (none) … 4 (the default Mamba of the AR suite), in the Blues palette.
--   mechlab plots/paper/fig6a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig6a", sweeps = { "ar", "mamba_conv" }, title = "Mamba on AR by conv width (best LR)" }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "mamba_conv" })
  local best, widths, convs = paper.accuracy_figure(rows, out, {
    title = "Mamba, AR", legend_title = "Conv.", palette = "blues", name = tostring,
    where = function(r) return r.arch == "mamba" and not r.pos_emb end,
    group = paper.mamba_conv,
  })
  return paper.accuracy_keys(best, widths, convs, function(k) return "d_conv " .. k end)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
