-- Memory benchmark: loops that create tensors and drop them must stay at a bounded resident size,
-- because every tensor's memory is reported to Lua's collector (docs/ARCHITECTURE.md, Binding).
-- Each loop prints its time, its peak resident size (VmHWM, reset before the loop) and the live
-- tensor storage at its end.
--   mechlab bench/memory.lua [iterations=4000000]
-- The small-tensor loops run `iterations` times; the 1 MiB loop a fortieth of that.
local n = math.tointeger(tonumber(arg and arg[1])) or 4000000

local function status(field)
  local f = assert(io.open("/proc/self/status"))
  local text = f:read("a")
  f:close()
  return tonumber(text:match(field .. ":%s+(%d+) kB")) / 1024
end

local function reset_peak() -- writing 5 to clear_refs resets VmHWM (Linux >= 4.0)
  local f = io.open("/proc/self/clear_refs", "w")
  if f then f:write("5"); f:close() end
end

local function measure(name, count, body)
  collectgarbage()
  reset_peak()
  local t0 = mech.sys.time()
  body(count)
  print(string.format("%-34s %9d iterations %6.1f s  peak RSS %7.1f MiB  live storage %6.2f MiB", name, count,
    mech.sys.time() - t0, status("VmHWM"), mech.memory_bytes() / 2 ^ 20))
end

local a = mech.randn(4, 4)
local w = mech.randn(4, 4):requires_grad_(true)
measure("4x4 op (a + a)", n, function(count)
  for _ = 1, count do local _ = a + a end
end)
measure("4x4 views (a[1], a:transpose)", n, function(count)
  for _ = 1, count do local _, _ = a[1], a:transpose(0, 1) end
end)
measure("4x4 op with autograd (w * 2):sum()", n // 4, function(count)
  for _ = 1, count do local _ = (w * 2):sum() end
end)
measure("1 MiB tensors (zeros(256, 1024))", n // 40, function(count)
  for _ = 1, count do local _ = mech.zeros(256, 1024) end
end)
