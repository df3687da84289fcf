-- Fig. 9b: AR, box plots of Attrib at the sequence mixer's output at the query (the key
-- corrupted, spec §6.7 and §10.5), by architecture; rows layer 0, 1, 2, columns 1-, 2- and
-- 3-layer models; every run passing the 0.01 filter. A high value in layer l: layer l writes the
-- answer into the final position.
--   mechlab plots/paper/fig9b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig9b", sweeps = { "ar", "ar_layers" }, title = "AR: mixer output at the query, by layer and depth" }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "ar_layers" })
  local facets, keys, unfiltered = {}, {}, false
  for layer = 0, 2 do
    for L = 1, 3 do
      local title = string.format("Layer %d, %d-layer", layer, L)
      local groups = {}
      if layer < L then
        local by, n, filtered, archs = paper.attrib_by_group(rows, paper.attrib_label("query", layer, "attention_output"),
          { where = function(r) return r.n_layers == L and paper.main_curve(r) end })
        if not filtered then unfiltered = true end
        local parts = {}
        for _, a in ipairs(archs) do
          groups[#groups + 1] = { label = paper.arch_name(a), values = by[a] }
          parts[#parts + 1] = string.format("%s %s (%d)", paper.arch_name(a), paper.fmt_mean(by[a], 2), #by[a])
        end
        keys[#keys + 1] = string.format("%s: %d runs; mean ± sd: %s", title, n, table.concat(parts, ", "))
      end
      facets[#facets + 1] = { title = title, groups = groups }
    end
  end
  mech.plot.box { facets = facets, ncol = 3, free_y = false, hlines = { 0, 1 }, ylabel = "Attrib @ Query (mixer output)",
    title = "AR" .. (unfiltered and " (no run passes the filter: all shown)" or ""), width = 720, height = 560, scale = 2,
    out = out }
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
