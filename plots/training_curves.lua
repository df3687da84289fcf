-- Training curves from run directories on disk: test accuracy (and loss) against step, one line per
-- run, read from each run's metrics.csv (long format: step,split,metric,value).
--   mechlab plots/training_curves.lua out.png runs/a runs/b ... [metric=accuracy] [split=test]
-- (out.svg or out.pdf for vector output)
local out = arg and arg[1]
if not out then error("usage: training_curves.lua out.png RUN_DIR... [metric=accuracy] [split=test]") end
local metric, split, dirs = "accuracy", "test", {}
for i = 2, #arg do
  local k, v = arg[i]:match("^(%w+)=(.*)$")
  if k == "metric" then metric = v
  elseif k == "split" then split = v
  elseif k then error("training_curves.lua: unknown option '" .. k .. "'")
  else dirs[#dirs + 1] = arg[i] end
end
if #dirs == 0 then error("training_curves.lua: no run directory given") end

local series = {}
local csv = require "mech.csv"
for _, dir in ipairs(dirs) do
  local xs, ys = {}, {}
  for _, r in ipairs(csv.read_metrics(dir .. "/metrics.csv")) do
    if r.split == split and r.metric == metric then xs[#xs + 1], ys[#ys + 1] = r.step, r.value end
  end
  series[#series + 1] = { label = dir:match("([^/]+)/*$") or dir, x = xs, y = ys }
end

mech.plot.lines { series = series, title = string.format("%s %s", split, metric), xlabel = "step",
  ylabel = metric, out = out }
print("wrote " .. out .. " and " .. out:gsub("%.png$", "") .. ".csv")
