-- Fig. 7: learned positions against none, accuracy against width at the best learning rate;
-- facets AR, ATR (5, 20), ATR (10, 20); solid = NoPE, dashed = PE, colour by architecture.
--   mechlab plots/paper/fig7.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig7", sweeps = { "ar", "atr_easy", "atr_hard" }, title = "PE (dashed) vs NoPE (solid)",
  -- the quick profile trains the main curves only: its `nope` slice adds Attention's NoPE runs
  slices = { quick = { ar = { "nope" } } } }

function recipe.draw(dirs, out)
  local settings = {
    { title = "AR, L = 32", rows = paper.results(dirs, "ar"), preset = "ar_32" },
    { title = "(5, 20)", rows = paper.results(dirs, "atr_easy"), preset = "pcfg_5_20" },
    { title = "(10, 20)", rows = paper.results(dirs, "atr_hard"), preset = "pcfg_10_20" },
  }
  local panels, keys = {}, {}
  for _, st in ipairs(settings) do
    local series = {}
    for _, pe in ipairs { false, true } do
      local best, widths, archs = paper.best_per_width(st.rows, {
        where = function(r) return paper.task_is(r, st.preset) and r.pos_emb == pe end })
      for _, s in ipairs(paper.accuracy_series(best, widths, archs, { dashed = pe })) do series[#series + 1] = s end
      for _, k in ipairs(paper.accuracy_keys(best, widths, archs, nil, st.title .. (pe and " PE " or " NoPE "))) do
        keys[#keys + 1] = k
      end
    end
    -- each architecture's NoPE then PE series, architectures in the paper's order (its colour)
    local keys_in_order, by_key = {}, {}
    for _, sr in ipairs(series) do
      if not by_key[sr.key] then by_key[sr.key] = {}; keys_in_order[#keys_in_order + 1] = sr.key end
      table.insert(by_key[sr.key], sr)
    end
    series = {}
    for _, k in ipairs(paper.sort_keys(keys_in_order)) do
      for _, sr in ipairs(by_key[k]) do series[#series + 1] = sr end
    end
    panels[#panels + 1] = { title = paper.panel_title(st.title, st.rows), series = series }
  end
  paper.draw_accuracy(panels, out, { title = "Positions: dashed PE, solid NoPE", legend = "bottom", width = 620,
    height = 320 })
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
