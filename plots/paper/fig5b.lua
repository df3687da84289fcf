-- Fig. 5b: ATR split, dev against test accuracy of every evaluated checkpoint (α = 0.2), with the
-- best-dev run per width (the mean over seeds, Fig. 5a's selection) joined by a path per
-- architecture.
--   mechlab plots/paper/fig5b.lua DIR [OUT.png]
-- The checkpoints come from the sweep directory's curves.csv or, when the sweep's entry is a
-- committed results CSV (`experiments/paper.lua --results docs/results`), from the file beside it
-- with "-curves" added (docs/results/atr-split-quick-curves.csv): one row per checkpoint,
-- `run,arch,step,dev,test`, the values copied verbatim from curves.csv. Written by
--   mechlab plots/paper/fig5b.lua --curves SWEEPDIR OUT.csv
local paper = require "mech.paper"
local sweep = require "mech.sweep"
local csv = require "mech.csv"

local recipe = { id = "fig5b", sweeps = { "atr_split" }, title = "ATR split: dev vs test accuracy, every checkpoint" }

--- The committed checkpoints' file for a results CSV entry (X.csv -> X-curves.csv).
function recipe.curves_file(results_csv) return (results_csv:gsub("%.csv$", "-curves.csv")) end

-- {["run@step"] = {arch =, dev =, test =}} from a sweep directory's curves.csv or the committed file
local function checkpoints(src)
  local points = {}
  if src:match("%.csv$") then
    for _, r in ipairs(sweep.results(recipe.curves_file(src))) do
      points[r.run .. "@" .. r.step] = { arch = r.arch, dev = r.dev, test = r.test }
    end
    return points
  end
  for _, r in ipairs(sweep.results(src .. "/curves.csv")) do
    if r.metric == "accuracy" and (r.split == "dev" or r.split == "test") then
      local k = r.run .. "@" .. r.step
      local p = points[k] or { arch = r.arch }
      points[k] = p
      p[r.split] = r.value
    end
  end
  return points
end

--- Writes the committed checkpoints' file from a sweep directory's curves.csv: the dev and test
--- accuracy of every checkpoint, one row each, sorted by run and step; returns the row count.
function recipe.write_curves(dir, out)
  local f = io.open(dir .. "/curves.csv", "rb")
  if not f then error("fig5b.lua: cannot read '" .. dir .. "/curves.csv' (run `mechlab sweep aggregate DIR` first)", 0) end
  local col, by, keys = nil, {}, {}
  for line in f:lines() do
    local v = csv.fields(line)
    if not col then
      col = {}
      for i, h in ipairs(v) do col[h] = i end
    elseif v[col.metric] == "accuracy" and (v[col.split] == "dev" or v[col.split] == "test") then
      local run, step = v[col.run], tonumber(v[col.step])
      local k = run .. "@" .. step
      if not by[k] then by[k] = { run = run, arch = v[col.arch], step = step }; keys[#keys + 1] = by[k] end
      by[k][v[col.split]] = v[col.value] -- the string as written: the same double when read back
    end
  end
  f:close()
  table.sort(keys, function(a, b) if a.run ~= b.run then return a.run < b.run end return a.step < b.step end)
  local lines = { "run,arch,step,dev,test" }
  for _, p in ipairs(keys) do
    if p.dev and p.test then lines[#lines + 1] = table.concat({ p.run, p.arch, p.step, p.dev, p.test }, ",") end
  end
  mech.sys.write_atomic(out, table.concat(lines, "\n") .. "\n")
  return #lines - 1
end

function recipe.draw(dirs, out)
  local points, archs, seen = checkpoints(dirs.atr_split), {}, {}
  local keys_sorted = {}
  for k, p in pairs(points) do
    keys_sorted[#keys_sorted + 1] = k
    if not seen[p.arch] then seen[p.arch] = true; archs[#archs + 1] = p.arch end
  end
  paper.sort_keys(archs)
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
    series[#series + 1] = { label = paper.arch_name(a), key = a, x = bx, y = by, path = true, highlight = true, alpha = 0.9 }
    keys[#keys + 1] = string.format("%s: %d checkpoints; best dev per width: %s", paper.arch_name(a), #x,
      table.concat(parts, ", "))
  end
  mech.plot.scatter { series = series, xlim = { 0, 1.05 }, ylim = { 0, 1.05 }, title = "ATR split",
    xlabel = "dev accuracy", ylabel = "test accuracy", legend_title = "Arch.", width = 420, height = 360, scale = 2,
    caption = "every checkpoint at α = 0.2; large outlined points joined by a path: the best-dev run per width",
    out = out }
  return keys
end

if (...) == "--curves" then
  local dir, out = select(2, ...)
  if not (dir and out) then error("fig5b.lua --curves: expected SWEEPDIR OUT.csv", 0) end
  print(string.format("%s: %d checkpoints", out, recipe.write_curves(dir, out)))
elseif select("#", ...) > 0 then
  paper.main(recipe, ...)
end
return recipe
