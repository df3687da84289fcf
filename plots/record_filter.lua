-- Which runs of the committed quick sweeps passed the paper's 0.01 filter, per position, written
-- as docs/img/reproduction/filter.csv (sweep, run, position, attrib) for drawing the figures
-- from the committed rows (`mechlab experiments/paper.lua --results docs/results`).
--
-- The committed report-step rows of AR, the Mamba conv ablation and ATR (5, 20)
-- (docs/results/ar-quick.csv, mamba-conv-quick.csv, atr-easy-quick.csv) carry no filter
-- denominators (attrib_den), and the run directories they came from are gone. (atr_hard's and
-- atr_split's rows, taken later, do carry them: their figures take the filter from the rows, and
-- the record lists none of their runs.) The figures drawn from those directories
-- plotted exactly the runs that passed: Fig. 3b the value's filter on AR, Fig. 3c the query's,
-- Fig. 4b every position on ATR (5, 20), Fig. 6b every position on Mamba (ar and mamba_conv).
-- Each plotted point is matched to its run by its value(s) at 9 significant digits, as the
-- figure CSVs write them. Run it once on the figure CSVs drawn from the full results, before
-- they are redrawn:
-- (Fig. 6b now draws the paper's kernels 2-4 only, so a second run would lose kernel 0's run:
-- the script refuses to overwrite filter.csv without `force`.)
--   mechlab plots/record_filter.lua [ROOT] [force]
local sweep = require "mech.sweep"
local paper = require "mech.paper"

local root = (...) or "."
if mech.sys.exists(root .. "/docs/img/reproduction/filter.csv") and select(2, ...) ~= "force" then
  error("record_filter.lua: " .. root .. "/docs/img/reproduction/filter.csv exists; it was recorded from the figures "
    .. "drawn on the full results (pass `force` to record it again from the current figure CSVs)", 0)
end
local function rows_of(file) return sweep.results(root .. "/" .. file) end
local results = { ar = "docs/results/ar-quick.csv", mamba_conv = "docs/results/mamba-conv-quick.csv",
  atr_easy = "docs/results/atr-easy-quick.csv" }
local pos_of = { target_item_orig = "value", query_item = "query", query_item_orig = "key" }

-- runs[sweep] = list of {id, arch, d_conv, value =, query =, key =} in file order
local runs = {}
for name, file in pairs(results) do
  local by, list = {}, {}
  for _, r in ipairs(rows_of(file)) do
    if r.step_kind == "report" and r.split == "test" then
      local e = by[r.run]
      if not e then
        e = { id = r.run, sweep = name, arch = r.arch, conv = paper.mamba_conv(r) }
        by[r.run], list[#list + 1] = e, e
      end
      local p = r.metric:match("^1%.%u+%.query_item_orig%.([%w_]+)%.block_input%.attrib$")
      if p and pos_of[p] then e[pos_of[p]] = r.value end
    end
  end
  runs[name] = list
end

local function g9(v) return string.format("%.9g", v) end
local out, seen, taken = {}, {}, {}
-- the run of sweeps `names` that `want` accepts whose values at the positions equal the point's,
-- not yet taken by another point of the same figure (two runs can share a value: both 0)
local function match(names, want, values, what, pos)
  for _, n in ipairs(names) do
    for _, e in ipairs(runs[n]) do
      local ok = want(e) and not taken[e.sweep .. "|" .. e.id .. "|" .. pos]
      for pos, v in pairs(values) do ok = ok and e[pos] ~= nil and g9(e[pos]) == g9(v) end
      if ok then taken[e.sweep .. "|" .. e.id .. "|" .. pos] = true; return e end
    end
  end
  error("record_filter.lua: " .. what .. " matches no committed run", 0)
end
local function record(e, pos)
  local k = e.sweep .. "|" .. e.id .. "|" .. pos
  if not seen[k] then seen[k] = true; out[#out + 1] = { e.sweep, e.id, pos, e[pos] } end
end

local arch_of = {}
for _, a in ipairs(paper.archs) do arch_of[paper.arch_name(a)] = a; arch_of[a] = a end
local fig = root .. "/docs/img/reproduction/"
for _, s in ipairs { { "fig3b", "value", "query" }, { "fig3c", "query", "key" } } do
  for _, p in ipairs(sweep.results(fig .. s[1] .. ".csv")) do
    local e = match({ "ar" }, function(e) return e.arch == arch_of[p.series] end, { [s[2]] = p.x, [s[3]] = p.y },
      s[1] .. ".csv point " .. p.series, s[2])
    record(e, s[2])
  end
end
local names = { Value = "value", Query = "query", Key = "key" }
taken = {} -- each figure's points are matched among all runs
for _, p in ipairs(sweep.results(fig .. "fig4b.csv")) do
  local pos = names[p.panel:match("^@(%a+)")]
  record(match({ "atr_easy" }, function(e) return e.arch == arch_of[p.group] end, { [pos] = p.value }, "fig4b.csv " .. p.group, pos), pos)
end
taken = {}
for _, p in ipairs(sweep.results(fig .. "fig6b.csv")) do
  local pos, conv = names[p.panel:match("^@(%a+)")], tonumber(p.group:match("%d+"))
  record(match({ "mamba_conv", "ar" }, function(e) return e.arch == "mamba" and e.conv == conv end, { [pos] = p.value },
    "fig6b.csv " .. p.group, pos), pos)
end

table.sort(out, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  if x[3] ~= y[3] then return x[3] < y[3] end
  return x[2] < y[2]
end)
local lines = { "sweep,run,position,attrib" }
for _, r in ipairs(out) do lines[#lines + 1] = string.format("%s,%s,%s,%s", r[1], r[2], r[3], g9(r[4])) end
mech.sys.write_atomic(fig .. "filter.csv", table.concat(lines, "\n") .. "\n")
print(string.format("%d (run, position) pairs pass the filter: %sfilter.csv", #out, fig))
