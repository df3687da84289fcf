-- A dense scatter as Fig. 5b draws it (6,000 points, 420 x 360 at scale 2, PNG): milliseconds per
-- figure with opaque points and with translucent ones (α = 0.2: each point is a group of fill and
-- outline, composited at its α), side by side in one run. Prints numbers and asserts nothing.
--   build/mechlab bench/bench_plot.lua [points=6000] [reps=5]
local opts = {}
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(%d+)$")
  if not k then error("bench_plot.lua: expected points=N or reps=N, got " .. a, 0) end
  opts[k] = tonumber(v)
end
local n, reps = opts.points or 6000, opts.reps or 5

math.randomseed(1)
local function series(alpha)
  local out = {}
  for s = 1, 6 do
    local x, y = {}, {}
    for i = 1, n // 6 do
      x[i] = math.random()
      y[i] = math.min(1, math.max(0, x[i] + (math.random() - 0.5) * 0.3))
    end
    out[s] = { label = "series " .. s, x = x, y = y, alpha = alpha }
  end
  return out
end

-- the CPU beside the numbers, with its family and model (a virtual machine may say only "AMD EPYC")
local function cpu()
  local f, info = io.open("/proc/cpuinfo"), {}
  for line in (f and f:read("a") or ""):gmatch("[^\n]+") do
    local k, v = line:match("^([%w ]-)%s*: (.*)$")
    if k and not info[k] then info[k] = v end
  end
  if f then f:close() end
  return string.format("%s, family %s model %s", info["model name"] or "unknown CPU", info["cpu family"] or "?",
    info.model or "?")
end

local out = os.tmpname() .. ".png"
print(string.format("bench_plot: %d points, %d figures each, CPU time (%s)", n, reps, cpu()))
for _, alpha in ipairs { 1, 0.2 } do
  local s = series(alpha)
  local t0 = os.clock()
  for _ = 1, reps do
    mech.plot.scatter { series = s, xlim = { 0, 1.05 }, ylim = { 0, 1.05 }, width = 420, height = 360, scale = 2,
      out = out }
  end
  print(string.format("  alpha %.1f: %7.1f ms a figure", alpha, (os.clock() - t0) * 1000 / reps))
end
os.remove(out)
