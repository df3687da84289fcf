-- Training curves from run directories on disk: test accuracy (and loss) against step, one line per
-- run, read from each run's metrics.csv (long format: step,split,metric,value).
--   mechlab plots/training_curves.lua out.png runs/a runs/b ... [metric=accuracy] [split=test]
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

-- One CSV row: step,split,metric,value (RFC 4180 quoting: "a ""b""" is a field with quotes).
local function parse(line)
  local fields, pos = {}, 1
  while pos <= #line + 1 do
    if line:sub(pos, pos) == '"' then
      local buf, e = {}, pos + 1
      while true do
        local q = line:find('"', e, true) or error("metrics.csv: unterminated quote in: " .. line)
        buf[#buf + 1] = line:sub(e, q - 1)
        if line:sub(q + 1, q + 1) ~= '"' then pos = q + 2; break end
        buf[#buf + 1], e = '"', q + 2
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local c = line:find(",", pos, true) or (#line + 1)
      fields[#fields + 1] = line:sub(pos, c - 1)
      pos = c + 1
    end
  end
  return fields
end

local series = {}
for _, dir in ipairs(dirs) do
  local f = assert(io.open(dir .. "/metrics.csv"), "cannot open " .. dir .. "/metrics.csv")
  local header = f:read("l")
  if header ~= "step,split,metric,value" then error(dir .. "/metrics.csv: unexpected header '" .. tostring(header) .. "'") end
  local xs, ys = {}, {}
  for line in f:lines() do
    local r = parse(line)
    if r[2] == split and r[3] == metric then
      xs[#xs + 1], ys[#ys + 1] = tonumber(r[1]), tonumber(r[4])
    end
  end
  f:close()
  local label = dir:match("([^/]+)/*$") or dir
  series[#series + 1] = { label = label, x = xs, y = ys }
end

mech.plot.lines { series = series, title = string.format("%s %s", split, metric), xlabel = "step",
  ylabel = metric, out = out }
print("wrote " .. out .. " and " .. out:gsub("%.png$", "") .. ".csv")
