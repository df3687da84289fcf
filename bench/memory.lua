-- Memory benchmark: a loop creating 10^5 tensors of 1 MB (100 GB in total) must stay at a bounded
-- peak resident size, because tensor storage is reported to Lua's collector.
--   mechlab bench/memory.lua [count=100000]
local count = tonumber(arg and arg[1]) or 100000
local function vm(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local text = f:read("a")
  f:close()
  return tonumber(text:match(field .. ":%s+(%d+) kB") or 0) / 1024
end
local t0, peak_live = mech.sys.time(), 0
for i = 1, count do
  local t = mech.zeros(256, 1024) -- 1 MiB of float32
  if i % 1000 == 0 then peak_live = math.max(peak_live, mech.memory_bytes()) end
end
print(string.format("%d tensors of 1 MiB in %.1f s: peak live tensor memory %.0f MiB, peak resident size %.0f MiB",
  count, mech.sys.time() - t0, peak_live / 2 ^ 20, vm("VmHWM")))
