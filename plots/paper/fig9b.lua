-- Fig. 9b: AR, box plots of Attrib at the sequence mixer's output at the query (the key
-- corrupted, spec §6.7 and §10.5), by architecture; rows layer 0, 1, 2, columns 1-, 2- and
-- 3-layer models; every run passing the 0.01 filter. A high value in layer l: layer l writes the
-- answer into the final position.
--   mechlab plots/paper/fig9b.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig9b", sweeps = { "ar", "ar_layers" }, title = "AR: mixer output at the query, by layer and depth",
  -- `ar`'s quick rows never kept the mixer output; its learning-rate slice trained their seed-42
  -- runs at lr 1e-3 again with every layer's, and gives the 2-layer column
  slices = { quick = { ar = { "lr_slice" } } } }

function recipe.draw(dirs, out)
  local layers = paper.results(dirs, "ar_layers")
  -- the 2-layer runs at the learning rates the 1- and 3-layer runs have (all of them when those
  -- have not run): at the quick profile, lr 1e-3 alone, not the slice's other three
  local lrs = {}
  for _, r in ipairs(layers) do lrs[r.lr] = true end
  local settings = {}
  for L = 1, 3 do
    settings[L] = { title = L .. "-layer", rows = L == 2 and paper.results(dirs, "ar", "attention_output") or layers,
      where = function(r)
        return r.n_layers == L and paper.main_curve(r) and (L ~= 2 or next(lrs) == nil or lrs[r.lr] == true)
      end, depth = L }
  end
  return paper.attrib_boxes(settings, { 0, 1, 2 }, out, {
    label = function(layer) return paper.attrib_label("query", layer, "attention_output") end,
    facet_title = function(layer, st)
      return layer < st.depth and string.format("Layer %d, %s", layer, st.title)
        or string.format("%s model: no layer %d", st.title, layer)
    end,
    skip = function(layer, st) return layer >= st.depth end,
    ncol = 3, free_y = false, ylabel = "Attrib @ Query (mixer output)", title = "AR", width = 720, height = 560,
    caption = "rows: the layer patched; columns: the model's depth (no panel where the model has no such layer)" })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
