-- Results and metrics as proper CSV (issue 41, finding 7): quoting of `"` and `,`, embedded
-- newlines, CRLF, numbers read anchored (step -5 is -5), and one rule on duplicate rows in the
-- loader that figures and tables share (sweep.results).
local T = require "check"
local sweep = require "mech.sweep"
local csv = require "mech.csv"

local root = os.tmpname()
os.remove(root)
mech.sys.mkdir(root)

local function read(path)
  local f = assert(io.open(path, "rb"))
  local t = f:read("a")
  f:close()
  return t
end
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A sweep directory of one finished run whose metrics.csv is `metrics` (no training).
local n = 0
local function finished_run(metrics)
  n = n + 1
  local dir = root .. "/s" .. n
  local s = sweep.run({ name = "c", base = { task = "ar_32", model = { n_layers = 1, d_model = 8 }, steps = 2,
    eval_every = 2 }, grid = { lr = { 1e-3 } } }, { dir = dir, executor = "print" })
  local id = sweep.load({ name = "c", base = { task = "ar_32", model = { n_layers = 1, d_model = 8 }, steps = 2,
    eval_every = 2 }, grid = { lr = { 1e-3 } } }).runs[1].id
  local rdir = dir .. "/runs/" .. id
  mech.sys.mkdir(rdir)
  write(rdir .. "/manifest.json", '{"status": "done", "step": 2}')
  write(rdir .. "/metrics.csv", metrics)
  return dir, id, s
end

local function find(rows, want)
  for _, r in ipairs(rows) do
    local ok = true
    for k, v in pairs(want) do if r[k] ~= v then ok = false end end
    if ok then return r end
  end
end

T.test("split and metric names holding commas, quotes and newlines survive aggregate and read back", function()
  local dir = finished_run('step,split,metric,value\n2,"te,st",accuracy,0.5\n2,"a ""q""",accuracy,0.25\n'
    .. '2,"two\nlines",accuracy,0.75\n')
  sweep.aggregate(dir)
  local rows = sweep.results(dir)
  T.truthy(find(rows, { split = "te,st", metric = "accuracy", step_kind = "final", value = 0.5 }), read(dir .. "/results.csv"))
  T.truthy(find(rows, { split = 'a "q"', metric = "accuracy", step_kind = "final", value = 0.25 }))
  T.truthy(find(rows, { split = "two\nlines", metric = "accuracy", step_kind = "final", value = 0.75 }))
  for _, r in ipairs(rows) do T.eq(r.status, "done") end -- no row was torn into other columns
end)

T.test("a value holding a comma or quote is quoted in results.csv; no row gains a column", function()
  local dir = finished_run('step,split,metric,value\n2,test,accuracy,0.5\n2,test,loss,"1,5"\n2,test,prob,"x""y"\n'
    .. "2,dev,loss,1,5\n")
  sweep.aggregate(dir)
  local recs = csv.parse(read(dir .. "/results.csv"))
  for _, r in ipairs(recs) do T.eq(#r, #recs[1], "line " .. r.line .. " has " .. #r .. " fields") end
  local rows = sweep.results(dir)
  T.truthy(find(rows, { metric = "loss", step_kind = "final", value = "1,5" }), read(dir .. "/results.csv"))
  T.truthy(find(rows, { metric = "prob", step_kind = "final", value = 'x"y' }))
end)

T.test("step -5 is read as -5, never 5; numbers are read anchored", function()
  local dir = finished_run("step,split,metric,value\n-5,test,accuracy,0.9\n2,test,accuracy,0.5\n")
  sweep.aggregate(dir)
  for _, r in ipairs(sweep.results(dir)) do T.truthy(r.step ~= 5, "a row at step 5") end
  T.truthy(find(sweep.results(dir), { step_kind = "final", step = 2 }))
  local path = root .. "/m.csv"
  write(path, "step,split,metric,value\n-5,test,accuracy,0.9\n")
  T.eq(csv.read_metrics(path)[1].step, -5)
  T.eq(csv.number("-5"), -5)
  T.eq(csv.number("1e-3"), 1e-3)
  T.eq(csv.number("5x"), nil)
  T.eq(csv.number(" 5"), nil)
  T.eq(csv.number("0x10"), nil)
end)

T.test("a CRLF results.csv reads as its LF form; a quoted field may hold a newline", function()
  local dir = finished_run("step,split,metric,value\n2,test,accuracy,0.5\n")
  sweep.aggregate(dir)
  local lf = sweep.results(dir)
  write(root .. "/crlf.csv", (read(dir .. "/results.csv"):gsub("\n", "\r\n")))
  local crlf = sweep.results(root .. "/crlf.csv")
  T.eq(crlf, lf)
  T.truthy(crlf[1].value ~= nil)
  write(root .. "/nl.csv", 'run,metric,value\n"a\nb",accuracy,0.5\n')
  local rows = sweep.results(root .. "/nl.csv")
  T.eq(#rows, 1)
  T.eq(rows[1].run, "a\nb")
end)

T.test("duplicate rows: the same row twice counts once; two values for one row are an error", function()
  local text = "run,lr,seed,split,metric,step_kind,value\n"
    .. "a,0.001,1,test,accuracy,report,0.5\n" .. "b,0.01,1,test,accuracy,report,0.6\n"
    .. "b,0.01,1,test,accuracy,report,0.6\n"
  write(root .. "/dup.csv", text)
  local rows = sweep.results(root .. "/dup.csv")
  T.eq(#rows, 2)
  -- the paper's selection (figures) and a per-run table see one row per run
  local chosen = sweep.select(rows, { over = { "lr" } })
  T.eq(#chosen, 1)
  T.eq(#chosen[1].runs, 1)
  write(root .. "/conflict.csv", text .. "b,0.01,1,test,accuracy,report,0.7\n")
  T.raises(function() sweep.results(root .. "/conflict.csv") end, "lines 3 and 5 are the same row with different values")
end)

os.execute("rm -rf '" .. root .. "'")
T.done()
