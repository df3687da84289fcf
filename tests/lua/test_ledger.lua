-- The claims ledger's one rule (lua/mech/paper/tables/verdict.lua): the noise rule, the floors of
-- ATR computed from the generator, the verdicts and the tally computed from the rows. Runs from the
-- repository root (ctest sets it).
local T = require "check"
local V = require "mech.paper.tables.verdict"
local Fl = require "mech.paper.tables.floors"
local page = require "mech.paper.tables.page"
local ledger = require "mech.paper.tables.ledger"
local S = require "mech.paper.tables.stats"

-- one claim of the given comparisons, judged
local function judge(...)
  local checks = { ... }
  return V.claim({ checks = function() return checks end }, {})
end
local function acc(v, se, extra)
  local c = { v = v, se = se, runs = 1, label = "cell" }
  for k, x in pairs(extra or {}) do c[k] = x end
  return c
end

T.test("two numbers closer than twice their combined error cannot be told apart", function()
  -- 0.55 ± 0.028 against a bound of 0.5: 0.05 < 2 × 0.028
  T.eq(judge({ op = ">=", a = acc(0.55, 0.028), b = 0.5 }).results, { "?" })
  T.eq(judge({ op = ">=", a = acc(0.60, 0.028), b = 0.5 }).results, { "yes" })
  T.eq(judge({ op = "<", a = acc(0.60, 0.028), b = 0.5 }).results, { "no" })
  -- two cells: 0.05 apart with a combined error of 0.039 (twice: 0.078)
  T.eq(judge({ op = ">", a = acc(0.60, 0.027), b = acc(0.55, 0.028) }).results, { "?" })
  T.eq(judge({ op = ">", a = acc(0.70, 0.025), b = acc(0.55, 0.028) }).results, { "yes" })
  T.eq(judge({ op = ">", a = acc(0.45, 0.028), b = acc(0.60, 0.027) }).results, { "no" })
  -- "matches or beats": within the noise below holds
  T.eq(judge({ op = ">~", a = acc(0.58, 0.027), b = acc(0.60, 0.027) }).results, { "yes" })
  T.eq(judge({ op = ">~", a = acc(0.45, 0.028), b = acc(0.60, 0.027) }).results, { "no" })
  -- Attrib carries no error: 0.51 against 0.5 holds
  T.eq(judge({ op = ">=", a = { v = 0.51, label = "Attrib" }, b = 0.5 }).results, { "yes" })
  -- the standard error itself: sqrt(p (1 - p) / n)
  local F = require "mech.paper.tables.format"
  T.near(F.se(0.5, 320), math.sqrt(0.25 / 320), 1e-12)
  local p, se = F.acc_se { { accuracy = 0.5, n = 320 }, { accuracy = 0.7, n = 1024 } }
  T.near(p, 0.6, 1e-12)
  T.near(se, math.sqrt(0.24 / 1344), 1e-12)
end)

T.test("n is read from the rows where they record it (a column or a metric eval_docs), else 320", function()
  local root = os.tmpname()
  os.remove(root)
  for _, d in ipairs { root, root .. "/docs", root .. "/docs/results" } do mech.sys.mkdir(d) end
  local head = "sweep,run,status,task,arch,n_layers,d_model,d_conv,pos_emb,lr,seed,steps,split,metric,step_kind,step,value"
  local function row(id, metric, v)
    return string.format("ar,%s,done,ar_32,attention,2,32,,false,0.001,42,50016,test,%s,report,50000,%s", id, metric, v)
  end
  local f = assert(io.open(root .. "/docs/results/ar-nope.csv", "wb"))
  f:write(table.concat({ head, row("a-1024", "accuracy", 0.5), row("a-1024", "eval_docs", 1024), row("b-old", "accuracy", 0.5) },
    "\n") .. "\n")
  f:close()
  -- the suites' report_docs column (a profile's axis) counts the report rows' documents
  f = assert(io.open(root .. "/docs/results/ar-layers-based-best-lr.csv", "wb"))
  f:write(head:gsub(",steps,", ",steps,report_docs,") .. "\n"
    .. row("c-report", "accuracy", 0.5):gsub(",50016,", ",50016,1024,") .. "\n")
  f:close()
  local data = page.load(root)
  local runs = data.runs.ar_nope
  os.execute(string.format("rm -rf '%s'", root))
  T.eq(data.runs.ar_layers_best["c-report"].n, 1024)
  T.eq(runs["a-1024"].n, 1024)
  T.eq(runs["b-old"].n, 320)
  local F = require "mech.paper.tables.format"
  T.eq(F.acc1(runs["a-1024"]), "0.500 ± 0.016")
  T.eq(F.acc1(runs["b-old"]), "0.500 ± 0.028")
end)

T.test("cells trained for very different epochs cannot tell; one rule gives every verdict", function()
  T.eq(judge({ op = "~", a = acc(0.7, 0.02, { epochs = 5 }), b = acc(0.7, 0.02, { epochs = 32 }), tol = 0.1 }).results, { "?" })
  T.eq(judge({ op = "~", a = acc(0.7, 0.02, { epochs = 15 }), b = acc(0.7, 0.02, { epochs = 16 }), tol = 0.1 }).results, { "yes" })
  local yes, no, unsure = { op = ">=", a = acc(0.9, 0.01), b = 0.5 }, { op = ">=", a = acc(0.1, 0.01), b = 0.5 },
    { op = ">=", a = acc(0.51, 0.02), b = 0.5 }
  T.eq(judge(yes, yes).verdict, "agrees")
  T.eq(judge(yes, no).verdict, "agrees in part")
  T.eq(judge(yes, unsure).verdict, "agrees in part")
  T.eq(judge(unsure, unsure).verdict, "cannot tell at quick scale")
  T.eq(judge(no, unsure).verdict, "disagrees")
  T.eq(judge({ op = ">=", a = nil, b = 0.5 }).verdict, "not run")
  T.eq(V.claim({ scale = "paper" }, {}).verdict, "paper scale only")
  T.eq(V.claim({ missing = "a proposal" }, {}).verdict, "not run")
  -- a single run near chance is said
  T.eq(judge({ op = "<", a = acc(0.02, 0.008), b = 0.1 }).near_chance, true)
  T.eq(judge(yes).near_chance, false)
end)

T.test("the floor: a claim of success within twice the error of the setting's floor fails", function()
  T.eq(judge({ op = ">=", a = acc(0.50, 0.028, { floor = 0.472 }), b = 0.3 }).results, { "no" })
  T.eq(judge({ op = ">=", a = acc(0.60, 0.027, { floor = 0.472 }), b = 0.3 }).results, { "yes" })
  -- two cells on the floor cannot be ranked, but can be equal
  local a, b = acc(0.47, 0.028, { floor = 0.472 }), acc(0.45, 0.028, { floor = 0.472 })
  T.eq(judge({ op = ">", a = a, b = b }).results, { "?" })
  T.eq(judge({ op = "~", a = a, b = b }).results, { "yes" })
  T.eq(judge({ op = "on floor", a = a, needs_b = false }).results, { "yes" })
  T.eq(judge({ op = "above floor", a = acc(0.6, 0.027, { floor = 0.472 }), needs_b = false }).results, { "yes" })
end)

T.test("the floor of ATR (5, 20) from the generator is what 1-layer Based and BaseConv reach", function()
  local f = Fl.floor("pcfg_5_20", "test", 320)
  T.eq(f.hits, 151)
  T.eq(f.rule, "root head")
  local s = S.compute(page.load("."))
  for _, a in ipairs { "based", "base_conv" } do
    for _, w in ipairs { 32, 64 } do T.eq(s.atr_layers[a][1][w][1].accuracy, f.value) end
  end
  -- every ATR accuracy cell carries its floor; AR has none
  local C = require "mech.paper.tables.cells"
  T.eq(C.atr(s, "mamba", 32).floor, f.value)
  T.eq(C.ar(s, "mamba", 32).floor, nil)
  T.eq(Fl.preset("pcfg_easy_8192-t42-numpy"), "pcfg_easy_8192")
end)

T.test("the tally counts the ledger's verdicts", function()
  local s = S.compute(page.load("."))
  local judged = ledger.judge(s)
  local count = {}
  for _, j in ipairs(judged) do count[j.verdict] = (count[j.verdict] or 0) + 1 end
  local total = 0
  for _, t in ipairs(V.tally(judged)) do
    T.eq(t[2], count[t[1]] or 0, t[1])
    total = total + t[2]
  end
  T.eq(total, #judged)
  -- the committed page's tally is this one
  local f = assert(io.open("docs/reproduction.md", "rb"))
  local text = f:read("a")
  f:close()
  T.truthy(text:find(table.concat(ledger.tally(s), "\n"), 1, true))
  -- every claim is judged to one of the six labels
  local labels = {}
  for _, l in ipairs(V.labels) do labels[l] = true end
  for i, j in ipairs(judged) do T.truthy(labels[j.verdict], "row " .. i) end
end)

T.test("a changed run changes a verdict and the tally", function()
  local s = S.compute(page.load("."))
  local before = ledger.judge(s)
  -- row 48, "ATR is implementable by a single attention head": 1-layer Attention at d = 64 falls to the floor
  T.eq(before[48].verdict, "agrees")
  local e = s.atr_layers.attention[1][64][1]
  local kept = e.accuracy
  e.accuracy = 0.48
  local after = ledger.judge(s)
  e.accuracy = kept
  T.eq(after[48].verdict, "agrees in part")
  T.truthy(table.concat(after[48].lines, "; "):find("✗ Attention d = 64 1-layer (5, 20) 0.480 ± 0.028 above its floor", 1, true))
  T.falsy(table.concat(V.tally(before)[1][3], ",") == table.concat(V.tally(after)[1][3], ","))
end)

T.test("bf16 beside fp32: the reading follows the numbers (pooled two-proportion error)", function()
  local tables = require "mech.paper.tables.render"
  local s = S.compute(page.load("."))
  local f = { { accuracy = 0.80, n = 320, value = 1, query = 0, key = 0 } }
  s.ar_lr.mamba[64][3e-3] = f
  local function reading(acc16)
    s.ar_bf16.mamba = { accuracy = acc16, n = 1024, lr = 3e-3, value = 1, query = 0, key = 0 }
    for _, line in ipairs(tables["ar-bf16"](s)) do
      if line:find("^| Mamba ") then return line end
    end
  end
  -- 0.80 of 320 against 0.78 of 1024: pooled p 0.785, 2 SE = 2 sqrt(p (1 - p) (1/320 + 1/1024)) = 0.053
  T.truthy(reading(0.78):find("| −0.020 (2 SE 0.053) |", 1, true), reading(0.78))
  T.truthy(reading(0.78):find("cannot tell apart", 1, true))
  T.truthy(reading(0.60):find("| different |", 1, true), reading(0.60))
  -- the ledger judged with the bf16 runs in the fp32 runs' place: Attention at chance moves verdicts
  s.ar_bf16 = { attention = { accuracy = 0.0, n = 1024, lr = 3e-4, value = 0, query = 0, key = 0 } }
  local lines = tables["ar-bf16"](s)
  T.truthy(lines[#lines]:find("different verdicts of", 1, true), lines[#lines])
  s.ar_bf16.attention.accuracy = 1.0
  lines = tables["ar-bf16"](s)
  T.truthy(lines[#lines]:find("the same verdict on all", 1, true), lines[#lines])
end)

T.test("Mamba's seeds in both precisions: retrieval, the precisions' difference and the verdicts each run gives", function()
  local tables = require "mech.paper.tables.render"
  local s = S.compute(page.load("."))
  local function run(seed, acc, query, key) return { seed = seed, accuracy = acc, n = 1024, lr = 3e-3, value = 0, query = query, key = key } end
  s.mamba_seeds = { fp32 = { run(42, 0.80, 0.0, 1.0), run(43, 0.70, 0.0, 1.0) },
    bf16 = { run(42, 0.78, 1.0, 0.0), run(43, 0.72, 0.2, 0.3) } }
  local lines = tables["ar-mamba-seeds"](s)
  local text = table.concat(lines, "\n")
  T.truthy(text:find("| 42 | 0.800 ± 0.012 | 0.00 / 0.00 / 1.00 | key | 0.780 ± 0.013 | 0.00 / 1.00 / 0.00 | query |", 1, true), text)
  T.truthy(text:find("| 43 |", 1, true) and text:find("| none ≥ 0.5 |", 1, true), text)
  T.truthy(text:find("key 2, query 0 of 2", 1, true) and text:find("key 0, query 1 of 2", 1, true), text)
  -- means 0.75 and 0.75, sds 0.0707 and 0.0424: 2 sqrt(0.005/2 + 0.0018/2) = 0.117
  T.truthy(text:find("over 2: +0.000, against twice the error of the difference of the two means from the seeds' spread, " ..
    "0.117: the precisions cannot be told apart", 1, true), text)
  -- row 6 moves with retrieval at the query: fp32's key runs keep it, bf16's seed 42 moves it
  T.truthy(text:find("row 6: fp32 agrees in part (seed 42), agrees in part (seed 43); bf16 agrees (seed 42)", 1, true), text)
  -- one run a precision: no spread to compare
  s.mamba_seeds.bf16 = { run(42, 0.78, 1.0, 0.0) }
  lines = tables["ar-mamba-seeds"](s)
  T.truthy(lines[#lines]:find("Fewer than two seeds", 1, true), lines[#lines])
end)

T.done()
