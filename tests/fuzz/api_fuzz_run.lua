--- Runs the API fuzzer (tests/fuzz/api_fuzz.lua) in child processes and judges them. A seed fails
--- when its child dies (a crash, or a sanitizer report: the sanitizer build aborts on the first
--- one), when LeakSanitizer reports a leak at exit, when the fuzzer reports a call that took
--- more than `slow` seconds of CPU time or a checked call (the Lua-mixer contract) whose error does
--- not name the layer and the class, or when a call hangs (the call log gains no line for
--- 3·slow + 10 s of wall time: the child is killed). The failing call is the last line of its log, printed with the child's output.
---
---   mechlab tests/fuzz/api_fuzz_run.lua [seeds=1] [seconds=30] [calls=N] [slow=5|20] [memory_mb=4096] [reach=FILE] [avoid=NAME,...]
---
--- seeds is one seed or a range (seeds=1-200: a campaign, one child of `seconds` per seed);
--- calls bounds each child by a number of calls instead (the same calls on every machine).
--- slow defaults to 20 s under the sanitizers (MECHLAB_SANITIZE=ON), which run calls about ten
--- times slower (the 100,032 documents of task:dataset() take 10 s there, under 1 s without).
--- Each child runs in a scratch directory of its own, under an allocation limit of memory_mb
--- (ulimit -v in a plain build, the sanitizer allocator's limit in the sanitizer build), so a
--- request for gigabytes is answered "out of memory" instead of paging the machine for minutes.
--- avoid=NAME,... is passed on to the fuzzer (to look past an open defect).
--- reach=FILE writes every function and method with its calls, and the calls that returned
--- without an error, summed over the passing seeds ("name calls returned", one a line).
--- Exit status 0 when every seed passed.
local sanitized = os.getenv("MECHLAB_SANITIZE") == "ON" or os.getenv("MECHLAB_SANITIZE") == "1"
local opts = { seeds = "1", seconds = 30, calls = 100000000, slow = sanitized and 20 or 5, memory_mb = 4096, reach = false, avoid = "" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then
    error("api_fuzz_run.lua: unknown argument '" .. a .. "' (seeds= seconds= calls= slow= memory_mb= reach= avoid=)", 0)
  end
  opts[k] = v
end
local first, last = tostring(opts.seeds):match("^(%d+)%-(%d+)$")
first = math.tointeger(tonumber(first or opts.seeds))
last = math.tointeger(tonumber(last)) or first
local seconds, slow, memory_mb = tonumber(opts.seconds), tonumber(opts.slow), math.tointeger(tonumber(opts.memory_mb))
local calls = math.tointeger(tonumber(opts.calls))
if not (first and last and seconds and calls and slow and memory_mb) then error("api_fuzz_run.lua: bad arguments", 0) end

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local fuzzer = here:sub(1, 1) == "/" and here .. "/api_fuzz.lua" or (os.getenv("PWD") .. "/" .. here .. "/api_fuzz.lua")
local scratch = os.tmpname()
os.remove(scratch)
mech.sys.mkdir(scratch)

local function read(path) return mech.sys.read_file(path) or "" end
local reach, reach_ok, total_calls = {}, {}, 0 -- summed over the passing seeds
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- one seed in a child; returns nil when it passed, else what went wrong
local function run_seed(seed)
  local dir = string.format("%s/seed%d", scratch, seed)
  mech.sys.mkdir(dir)
  local log, out, reached = dir .. "/calls.log", dir .. "/output.txt", dir .. "/reach.txt"
  local limit = sanitized
    and string.format("ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=%d ", memory_mb)
    -- + the program's own mappings and OpenBLAS's buffers: when its mmap fails, OpenBLAS retries
    -- forever (blas_memory_alloc), so the address space must leave it room beside big tensors
    or string.format("ulimit -v %d && ", (2 * memory_mb + 2048) * 1024)
  local cmd = string.format("cd %s && %sexec %s %s seed=%d calls=%d seconds=%g slow=%g dir=%s log=%s reach=%s avoid=%s",
    quote(dir), limit, quote(arg[-1]), quote(fuzzer), seed, calls, seconds, slow, quote(dir .. "/files"), quote(log), quote(reached), quote(opts.avoid))
  local pid = mech.sys.spawn({ "/bin/sh", "-c", cmd }, out)
  local last_size, last_change, code, signame = -1, mech.sys.time(), nil, nil
  while true do
    local done, c, sig = mech.sys.wait(pid, false)
    if done then code, signame = c, sig; break end
    local f = io.open(log, "rb")
    local size = f and f:seek("end") or 0
    if f then f:close() end
    if size ~= last_size then last_size, last_change = size, mech.sys.time() end
    if mech.sys.time() - last_change > 3 * slow + 10 then
      mech.sys.kill(pid, "SIGKILL")
      mech.sys.wait(pid)
      code, signame = nil, "hang"
      break
    end
    mech.sys.sleep(0.1)
  end
  local output = read(out)
  local text = read(log)
  -- the fuzzer's closing lines ("# ...") end its log too: a call may have redirected its output
  local closing = text:sub(-20000):match("\n(# fuzz: .*)$") or ""
  output = output .. (output:find("fuzz: seed", 1, true) and "" or closing:gsub("# ", ""))
  local last_call = text:sub(-20000):gsub("\n# .*$", "\n"):match("([^\n]*)\n$") or "(none)"
  local report = output:match("ERROR: %w+Sanitizer[^\n]*") or output:match("runtime error:[^\n]*")
    or output:match("slow call:[^\n]*") or output:match("unnamed contract error:[^\n]*")
  if code == 0 and not report then
    for name, n, ok in read(reached):gmatch("(%S+) (%d+) (%d+)\n") do
      reach[name] = (reach[name] or 0) + math.tointeger(tonumber(n))
      reach_ok[name] = (reach_ok[name] or 0) + math.tointeger(tonumber(ok))
    end
    total_calls = total_calls + (math.tointeger(tonumber(output:match("fuzz: seed %d+, (%d+) calls"))) or 0)
    print(string.format("seed %d passed: %s", seed, output:match("fuzz: ([^\n]*)") or "?"))
    os.execute("rm -rf " .. quote(dir))
    return nil
  end
  local what = signame == "hang" and string.format("no call finished for %g s", 3 * slow + 10)
    or signame and ("killed by " .. signame) or ("exit status " .. tostring(code))
  return string.format("seed %d FAILED (%s)%s\n  last call: %s\n  output (%s):\n%s", seed, what,
    report and ("\n  report: " .. report) or "", last_call, out, output:sub(-3000))
end

local failures = {}
for seed = first, last do
  local err = run_seed(seed)
  if err then
    print(err)
    failures[#failures + 1] = seed
  end
end
if opts.reach then
  local names, zero = {}, 0
  for name, n in pairs(reach) do names[#names + 1] = name; if n == 0 then zero = zero + 1 end end
  table.sort(names)
  local f = assert(io.open(opts.reach, "w"))
  for _, name in ipairs(names) do f:write(name, " ", reach[name], " ", reach_ok[name], "\n") end
  f:close()
  print(string.format("reach: %d calls over %d of %d functions and methods (passing seeds), written to %s",
    total_calls, #names - zero, #names, opts.reach))
end
if #failures == 0 then os.execute("rm -rf " .. quote(scratch)) end
print(string.format("api fuzz: %d seeds, %d failed%s", last - first + 1, #failures,
  #failures > 0 and (" (" .. table.concat(failures, ", ") .. "; logs under " .. scratch .. ")") or ""))
os.exit(#failures == 0 and 0 or 1)
