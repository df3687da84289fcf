-- Fig. 5b: ATR split, dev against test accuracy of every evaluated checkpoint (α = 0.2), with the
-- best-dev run per width (the mean over seeds, Fig. 5a's selection) joined by a path per
-- architecture.
--   mechlab plots/paper/fig5b.lua DIR [OUT.png]
local paper = require "mech.paper"
local sweep = require "mech.sweep"

local recipe = { id = "fig5b", sweeps = { "atr_split" }, title = "ATR split: dev vs test accuracy, every checkpoint" }

function recipe.draw(dirs, out)
  local curves = sweep.results(dirs.atr_split .. "/curves.csv")
  local points, archs, seen = {}, {}, {}
  for _, r in ipairs(curves) do
    if r.metric == "accuracy" and (r.split == "dev" or r.split == "test") then
      local k = r.run .. "@" .. r.step
      local p = points[k] or { arch = r.arch }
      points[k] = p
      p[r.split] = r.value
      if not seen[r.arch] then seen[r.arch] = true; archs[#archs + 1] = r.arch end
    end
  end
  paper.sort_keys(archs)
  local keys_sorted = {}
  for k in pairs(points) do keys_sorted[#keys_sorted + 1] = k end
  table.sort(keys_sorted)
  local dev_sel, test_sel, widths = dofile(paper.recipe_file("fig5a")).select(paper.results(dirs, "atr_split"))
  local series, keys = {}, {}
  for _, a in ipairs(archs) do
    local x, y = {}, {}
    for _, k in ipairs(keys_sorted) do
      local p = points[k]
      if p.arch == a and p.dev and p.test then x[#x + 1], y[#y + 1] = p.dev, p.test end
    end
    series[#series + 1] = { label = paper.arch_name(a), key = a, x = x, y = y, alpha = 0.2 }
    local bx, by, parts = {}, {}, {}
    for _, d in ipairs(widths) do
      local e, t = dev_sel[a] and dev_sel[a][d], test_sel[a] and test_sel[a][d]
      if e then
        bx[#bx + 1], by[#by + 1] = e.mean, t.mean
        parts[#parts + 1] = string.format("d=%d dev %s test %s", d, paper.fmt_mean(e.values), paper.fmt_mean(t.values))
      end
    end
    series[#series + 1] = { label = paper.arch_name(a), key = a, x = bx, y = by, path = true, alpha = 0.9 }
    keys[#keys + 1] = string.format("%s: %d checkpoints; best dev per width: %s", paper.arch_name(a), #x,
      table.concat(parts, ", "))
  end
  mech.plot.scatter { series = series, xlim = { 0, 1.05 }, ylim = { 0, 1.05 }, title = "ATR split",
    xlabel = "dev accuracy", ylabel = "test accuracy", legend_title = "Arch.", width = 420, height = 340, scale = 2,
    out = out }
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
