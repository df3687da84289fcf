--- The command line: mechlab sweep run|status|aggregate|exec|list ...
local util = require "mech.util"
local sweep = require "mech.sweep"
local store = require "mech.sweep.store"
local exec = require "mech.sweep.exec"

local cli = {}

local usage = [[
usage: mechlab sweep run FILE [--profile P] [--dir DIR] [--executor local|slurm|print] [--jobs N] [--force] [--retry]
       mechlab sweep status DIR
       mechlab sweep aggregate DIR
       mechlab sweep exec DIR RUN_ID
       mechlab sweep exec DIR --list FILE --index N      (the N-th run id of FILE, 0-based)
       mechlab sweep list FILE [--profile P]             (the runs, without training)]]

local function parse_flags(args, first, spec)
  local pos, flags = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    local name = a:match("^%-%-([%w_-]+)$")
    if name then
      name = name:gsub("-", "_")
      if spec[name] == nil then
        error(string.format("mechlab sweep: unknown option --%s (did you mean --%s?)\n%s", name,
          util.closest(name, spec):gsub("_", "-"), usage), 0)
      end
      if spec[name] == "flag" then flags[name] = true
      else
        i = i + 1
        if args[i] == nil then error("mechlab sweep: --" .. name .. " expects a value", 0) end
        flags[name] = spec[name] == "int" and (math.tointeger(tonumber(args[i])) or
          error("mechlab sweep: --" .. name .. " expects an integer, got " .. args[i], 0)) or args[i]
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return pos, flags
end

local function nth_line(path, n)
  local f = io.open(path, "rb")
  if not f then error("mechlab sweep exec: cannot read " .. path, 0) end
  local i = 0
  for line in f:lines() do
    if i == n then f:close(); return line end
    i = i + 1
  end
  f:close()
  error(string.format("mechlab sweep exec: %s has %d lines; no index %d", path, i, n), 0)
end

function cli.main(...)
  local args = { ... }
  local cmd = args[1]
  if cmd == "run" then
    local pos, f = parse_flags(args, 2, { profile = "string", dir = "string", executor = "string", jobs = "int",
      force = "flag", retry = "flag", max_parallel = "int", partition = "string", account = "string" })
    if #pos ~= 1 then error("mechlab sweep run: expected one sweep file\n" .. usage, 0) end
    local res = sweep.run(pos[1], f)
    if res.signal then os.exit(exec.exit_codes[res.signal] or 130) end
    if res.counts and res.counts.failed > 0 then os.exit(1) end
    if res.array_job then print(string.format("submitted array job %s and aggregation job %s", res.array_job,
      tostring(res.aggregate_job))) end
  elseif cmd == "status" then
    if #args ~= 2 then error("mechlab sweep status: expected a sweep directory\n" .. usage, 0) end
    local st = sweep.status(args[2])
    print(string.format("sweep %s (profile %s): %s", st.name, st.profile or "default", store.counts_line(st.counts, st.total)))
    for _, r in ipairs(st.runs) do
      if r.state ~= "done" and r.state ~= "pending" then
        local m = r.manifest
        print(string.format("  %-11s %s%s", r.state, r.id, m and m.step and string.format("  (step %d/%d)", m.step,
          r.steps) or "") .. (r.state == "failed" and m and m.error and ("  " .. m.error) or ""))
      end
    end
  elseif cmd == "aggregate" then
    if #args ~= 2 then error("mechlab sweep aggregate: expected a sweep directory\n" .. usage, 0) end
    local n = sweep.aggregate(args[2])
    print(string.format("%s: %d result rows; results.csv, curves.csv, summary.txt", args[2], n))
    io.write(mech.sys.read_file(args[2] .. "/summary.txt") or "")
  elseif cmd == "exec" then
    local pos, f = parse_flags(args, 2, { list = "string", index = "int" })
    local id = pos[2]
    if f.list then id = nth_line(f.list, f.index or error("mechlab sweep exec: --list needs --index", 0)) end
    if #pos < 1 or not id then error("mechlab sweep exec: expected DIR RUN_ID or DIR --list FILE --index N\n" .. usage, 0) end
    os.exit(sweep.exec(pos[1], id))
  elseif cmd == "list" then
    local pos, f = parse_flags(args, 2, { profile = "string" })
    if #pos ~= 1 then error("mechlab sweep list: expected one sweep file\n" .. usage, 0) end
    local s = sweep.load(pos[1], f.profile)
    for _, r in ipairs(s.runs) do print(r.id, r.steps .. " steps") end
    print(string.format("%d runs", #s.runs))
  else
    error((cmd and ("mechlab sweep: unknown command '" .. cmd .. "'\n") or "") .. usage, 0)
  end
end

return cli
