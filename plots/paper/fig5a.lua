-- Fig. 5a: ATR split, accuracy against width of the run with the best dev accuracy per
-- (architecture, width) (spec §5.6: the learning rate with the best mean dev accuracy over
-- seeds); facets dev | test, the test panel showing the same runs.
--   mechlab plots/paper/fig5a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig5a", sweeps = { "atr_split" }, title = "ATR split: dev and test accuracy of the best-dev runs" }

--- The dev selection and the test accuracy of the same runs, in best_per_width's form.
function recipe.select(rows)
  local dev, widths, archs = paper.best_per_width(rows, { split = "dev" })
  local test_of = {}
  for _, r in ipairs(rows) do
    if r.metric == "accuracy" and r.split == "test" and r.step_kind == "report" then test_of[r.run] = r.value end
  end
  local test = {}
  for a, by_d in pairs(dev) do
    test[a] = {}
    for d, e in pairs(by_d) do
      local values = {}
      for _, id in ipairs(e.runs) do values[#values + 1] = test_of[id] end
      local m, sd = paper.mean_sd(values)
      test[a][d] = { mean = m, sd = sd, n = #values, lr = e.lr, values = values, runs = e.runs }
    end
  end
  return dev, test, widths, archs
end

function recipe.draw(dirs, out)
  local dev, test, widths, archs = recipe.select(paper.results(dirs, "atr_split"))
  paper.draw_accuracy({
    { title = "dev", series = paper.accuracy_series(dev, widths, archs) },
    { title = "test", series = paper.accuracy_series(test, widths, archs) },
  }, out, { title = "ATR split", width = 560, height = 320 })
  local keys = paper.accuracy_keys(dev, widths, archs, nil, "dev ")
  for _, k in ipairs(paper.accuracy_keys(test, widths, archs, nil, "test ")) do keys[#keys + 1] = k end
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
