-- Fig. 6b: Mamba on AR, box plots of Attrib at the layer-1 block input by conv width; facets
-- @Key, @Query, @Value; every run passing the 0.01 filter (the paper: kernels 0 and 1 have none).
--   mechlab plots/paper/fig6b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig6b", sweeps = { "ar", "mamba_conv" }, title = "Mamba on AR: Attrib by conv width" }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "mamba_conv" })
  return paper.attrib_boxes({ { rows = rows, where = function(r) return r.arch == "mamba" and not r.pos_emb end } },
    { "key", "query", "value" }, out, { title = "Mamba, AR, key corrupted, layer-1 block input", ncol = 3,
    group = paper.mamba_conv, name = function(k) return "conv " .. k end, style = paper.conv_style, counts = true,
    -- the kernels the paper shows (its kernels 0 and 1 have no run passing the filter)
    keep = function(k) return k >= 2 end,
    caption = "runs passing the 0.01 filter (n per kernel); kernels 2-4 as in the paper", alpha = 0.6, width = 640, height = 320 })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
