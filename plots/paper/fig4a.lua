-- Fig. 4a: ATR accuracy against width at the best learning rate, one facet per setting
-- (L_max, |Σ|) = (5, 20), (5, 8192), (10, 20); the main curves (Attention with positions). At the
-- quick profile a setting of `atr_hard` is drawn from its quick32 runs (the paper's 32 epochs)
-- once they cover all its runs, else from its 5-epoch runs; each facet names its epochs.
--   mechlab plots/paper/fig4a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig4a", sweeps = { "atr_easy", "atr_hard" }, title = "ATR accuracy vs width per setting (best LR)",
  slices = { quick = { atr_hard = { "quick32" } } } }

function recipe.draw(dirs, out)
  local easy, hard = paper.results(dirs, "atr_easy"), paper.results(dirs, "atr_hard")
  local panels, keys = {}, {}
  for _, st in ipairs(paper.atr_settings(easy, hard)) do
    local best, widths, archs = paper.best_per_width(st.rows, { where = paper.main_curve })
    panels[#panels + 1] = { title = paper.panel_title("(L, |Σ|) = " .. st.title, st.rows), series = paper.accuracy_series(best, widths, archs) }
    for _, k in ipairs(paper.accuracy_keys(best, widths, archs, nil, st.title .. " ")) do keys[#keys + 1] = k end
  end
  paper.draw_accuracy(panels, out, { title = "ATR", legend = "bottom", width = 620, height = 320 })
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
