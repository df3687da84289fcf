-- Fig. 6a: Mamba on AR, accuracy against width at the best learning rate, one line per short-conv
-- width 0 (none) … 4 (the default Mamba of the AR suite), in the Blues palette.
--   mechlab plots/paper/fig6a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig6a", sweeps = { "ar", "mamba_conv" }, title = "Mamba on AR by conv width (best LR)",
  -- the quick profiles have one learning rate; at the quick profile the best of it and the slices'
  -- (d_conv 4: the AR slice's four rates and the d = 256 run; 0-3: mamba_conv's best_lr, Mamba's best rate)
  slices = { quick = { ar = { "lr_slice", "mamba_256" }, mamba_conv = { "best_lr" } } } }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "mamba_conv" })
  local best, widths, convs = paper.accuracy_figure(rows, out, {
    title = "Mamba, AR", legend_title = "Conv.", style = paper.conv_style, dodge = 6,
    name = function(k) return k == 0 and "0 (none)" or tostring(k) end,
    where = function(r) return r.arch == "mamba" and not r.pos_emb end,
    group = paper.mamba_conv, selection_caption = true, caption = "4: the Mamba of the AR suite",
  })
  return paper.accuracy_keys(best, widths, convs, function(k) return "d_conv " .. k end)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
