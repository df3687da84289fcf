-- The standard error of Attrib for runs whose rows predate it: reruns a sweep's interchange
-- evaluator on each finished run's report checkpoint, on the documents the run reported on
-- (report_docs, else eval_docs), and writes the Attrib and its standard error (`attrib_se`, the
-- delta method for a ratio of means, docs/interventions.md) of one component at every layer.
--   mechlab experiments/attrib_se.lua SWEEP_DIR OUT.csv [component=block_input] [runs=PATTERN]
-- OUT.csv has the columns sweep,run,split,step_kind,step,metric,value (the report step's rows, as
-- results.csv names them). The evaluation is the one the run's own rows come from, so its Attrib
-- equals theirs to the bit: docs/reproduction.md's tables check that before they use the errors.
-- Runs already in OUT.csv keep their rows and are not evaluated again (delete it to redo them),
-- so a sweep that is still training gains its finished runs' rows call by call.
local ic = require "mech.interchange"
local store = require "mech.sweep.store"
local train = require "mech.train"

local usage = "usage: mechlab experiments/attrib_se.lua SWEEP_DIR OUT.csv [component=block_input] [runs=PATTERN]"
local pos, component, pattern = {}, "block_input", nil
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if k == "component" then component = v
  elseif k == "runs" then pattern = v
  elseif k then error(usage .. "\n(unknown option '" .. k .. "=')", 0)
  else pos[#pos + 1] = a end
end
local dir, out = pos[1], pos[2]
if not (dir and out) or #pos > 2 then error(usage, 0) end

local record = store.read(dir, "attrib_se.lua") -- bounded and checked, as every sweep command reads it
local opts
for _, ev in ipairs(record.evaluators or {}) do
  if ev.kind == "interchange" and ev.at == "report" then
    opts = {}
    for k, v in pairs(ev) do if k ~= "kind" and k ~= "at" then opts[k] = v end end
  end
end
if not opts then error("attrib_se.lua: the sweep in " .. dir .. " has no interchange evaluator at the report step", 0) end

local header = "sweep,run,split,step_kind,step,metric,value"
local lines, n_runs, kept = { header }, 0, {}
local before = mech.sys.exists(out) and mech.sys.read_file(out)
if before then
  if before:sub(1, #header + 1) ~= header .. "\n" then
    error("attrib_se.lua: " .. out .. " is not a file of this script (its first line is not '" .. header .. "')", 0)
  end
  for line in before:sub(#header + 2):gmatch("[^\n]+") do
    local run = line:match("^[^,]*,([^,]*),")
    if not run then error("attrib_se.lua: " .. out .. ": a line without a run: " .. line, 0) end
    kept[run] = true
    lines[#lines + 1] = line
  end
end
local want = "^%d+%.%u+%.[%w_]+%.[%w_]+%." .. component:gsub("%p", "%%%0") .. "%.(attrib[_se]*)$"
for _, r in ipairs(store.status(dir).runs) do
  local c = r.manifest and r.manifest.config
  if r.state == "done" and c and (not pattern or r.id:find(pattern)) and not kept[r.id] then
    local ckpt = store.check_inside(dir, store.run_dir(dir, r.id), "attrib_se.lua") .. "/checkpoint-report.safetensors"
    local model, _, meta = mech.load(ckpt)
    local step = tonumber(meta["train.step"])
    local ds = train.make_task(c):dataset(c.report_docs or c.eval_docs, { seed = c.seed, split = "test" })
    local run_opts = { workers = mech.sys.cores() }
    for k, v in pairs(opts) do run_opts[k] = v end
    local t0 = mech.sys.time()
    local res = ic.evaluate(model, ds, run_opts)
    local names = {}
    for _, kv in ipairs(res.metrics) do
      local suffix = kv[1]:match(want)
      if suffix == "attrib" or suffix == "attrib_se" then names[#names + 1] = kv[1] end
    end
    table.sort(names)
    for _, name in ipairs(names) do
      lines[#lines + 1] = string.format("%s,%s,test,report,%d,%s,%.17g", record.name, r.id, step, name, res.by_name[name])
    end
    n_runs = n_runs + 1
    print(string.format("%s: %d rows, accuracy %.4f (%.0f s)", r.id, #names, res.accuracy, mech.sys.time() - t0))
  end
end
local n_kept = 0
for _ in pairs(kept) do n_kept = n_kept + 1 end
if n_runs + n_kept == 0 then
  error("attrib_se.lua: no finished run in " .. dir .. (pattern and (" matching '" .. pattern .. "'") or ""), 0)
end
-- a run's rows stay together, runs in the order of their ids, whatever order the calls added them
local body = {}
for i = 2, #lines do body[#body + 1] = lines[i] end
table.sort(body, function(a, b)
  local ra, rb = a:match("^[^,]*,([^,]*),"), b:match("^[^,]*,([^,]*),")
  if ra ~= rb then return ra < rb end
  return a < b
end)
mech.sys.write_atomic(out, header .. "\n" .. table.concat(body, "\n") .. "\n")
print(string.format("%s: %d runs evaluated, %d kept, %d rows", out, n_runs, n_kept, #body))
