-- Fig. 3b: AR, one point per run that passes the 0.01 filter (every learning rate): Attrib @ Value
-- against Attrib @ Query at the layer-1 block input (spec §6.7).
--   mechlab plots/paper/fig3b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig3b", sweeps = { "ar" }, title = "AR: Attrib @ Value vs @ Query, layer-1 block input" }

function recipe.draw(dirs, out)
  local n, filtered, series = paper.attrib_scatter(paper.results(dirs, "ar"), "value", "query", out, {
    title = "AR, key corrupted, filter @Value", caption = "layer-1 block input", where = function(r) return r.pos_emb == (r.arch == "attention") end,
  })
  local keys = { string.format(filtered and "%d runs pass the 0.01 filter" or "%d runs shown: none passes the 0.01 filter", n) }
  for _, k in ipairs(paper.scatter_keys(series, "@Value", "@Query")) do keys[#keys + 1] = k end
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
