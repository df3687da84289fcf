-- Fig. 4a: ATR accuracy against width at the best learning rate, one facet per setting
-- (L_max, |Σ|) = (5, 20), (5, 8192), (10, 20); the main curves (Attention with positions).
--   mechlab plots/paper/fig4a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig4a", sweeps = { "atr_easy", "atr_hard" }, title = "ATR accuracy vs width per setting (best LR)" }

function recipe.draw(dirs, out)
  local easy, hard = paper.results(dirs, "atr_easy"), paper.results(dirs, "atr_hard")
  local settings = {
    { title = "(5, 20)", rows = easy, preset = "pcfg_5_20" },
    { title = "(5, 8192)", rows = hard, preset = "pcfg_easy_8192" },
    { title = "(10, 20)", rows = hard, preset = "pcfg_10_20" },
  }
  local panels, keys = {}, {}
  for _, st in ipairs(settings) do
    local best, widths, archs = paper.best_per_width(st.rows, {
      where = function(r) return paper.task_is(r, st.preset) and paper.main_curve(r) end })
    panels[#panels + 1] = { title = paper.panel_title("(L, |Σ|) = " .. st.title, st.rows), series = paper.accuracy_series(best, widths, archs) }
    for _, k in ipairs(paper.accuracy_keys(best, widths, archs, nil, st.title .. " ")) do keys[#keys + 1] = k end
  end
  paper.draw_accuracy(panels, out, { title = "ATR", legend = "bottom", width = 620, height = 320 })
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
