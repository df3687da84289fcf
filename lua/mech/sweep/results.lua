--- Reading a sweep's results (for figure recipes): DIR/results.csv as rows, the paper's selection of
--- the best learning rate and its filter.
local util = require "mech.util"
local csv = require "mech.csv"

local results = {}

local fail = util.failer("sweep.")

local function convert(v)
  if v == "" then return nil end
  if v == "true" then return true elseif v == "false" then return false end
  local x = csv.number(v)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return v end -- nan, inf stay text, as ever
  return x
end

--- The rows of DIR/results.csv (or a results.csv path) as tables keyed by column, numbers and
--- booleans converted, empty fields nil. This is the one loader of results for figures and
--- tables alike, and it holds the one rule on duplicates: in a file of runs' rows (a `run` and a
--- `value` column) a row repeated exactly is kept once, and two rows that differ only in their
--- `value` are an error naming both lines.
function results.results(path)
  if type(path) ~= "string" then fail("results", "argument 1 expected a sweep directory or a results.csv path") end
  if not path:match("%.csv$") then path = path .. "/results.csv" end
  local text, err = mech.sys.read_file(path, csv.max_bytes)
  if not text then fail("results", "cannot read '" .. path .. "' (run `mechlab sweep aggregate DIR` first): " .. tostring(err)) end
  local ok, recs = pcall(csv.parse, text, path)
  if not ok then fail("results", recs) end
  local header, rows = recs[1] or {}, {}
  -- the rule applies to rows of runs (a `run` and a `value` column: results.csv, curves.csv);
  -- a figure's points (panel, group, value) may repeat
  local value_col, has_run
  for i, h in ipairs(header) do
    if h == "value" then value_col = i end
    if h == "run" then has_run = true end
  end
  if not has_run then value_col = nil end
  local seen = {} -- the row without its value -> {value, line}
  for k = 2, #recs do
    local fields = recs[k]
    if not has_run then
      local row = {}
      for i, h in ipairs(header) do row[h] = convert(fields[i] or "") end
      rows[#rows + 1] = row
      goto continue
    end
    local value = value_col and fields[value_col] or ""
    local parts = {}
    for i = 1, #header do parts[i] = i == value_col and "" or (fields[i] or "") end
    local key = table.concat(parts, "\0")
    local prior = seen[key]
    if prior and prior[1] ~= value then
      fail("results", string.format("%s: lines %d and %d are the same row with different values (%s and %s)", path,
        prior[2], fields.line, prior[1], value))
    end
    if not prior then
      seen[key] = { value, fields.line }
      local row = {}
      for i, h in ipairs(header) do row[h] = convert(fields[i] or "") end
      rows[#rows + 1] = row
    end
    ::continue::
  end
  return rows, header
end

local function key_of(row, ignore)
  local parts = {}
  local names = {}
  for k in pairs(row) do
    if not ignore[k] then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. tostring(row[k]) end
  return table.concat(parts, "|")
end

--- The paper's selection (the best learning rate per architecture and width; docs/reproduction.md,
--- "Model selection and the filter"):
--- rows of one metric/split/step_kind are grouped by every axis but `over` and seed; within a
--- group, the `over` values with the highest mean over seeds win. Returns a list of
--- {runs = {ids}, value = mean, over = {axis = value}, row = a representative row}, and a set of
--- the selected run ids. rule: {metric = "accuracy", split = "test", step_kind = "report", over = {"lr"}}.
function results.select(rows, rule)
  rule = rule or {}
  local metric, split, kind = rule.metric or "accuracy", rule.split or "test", rule.step_kind or "report"
  local over = rule.over or { "lr" }
  local ignore = { run = true, value = true, step = true, status = true, seed = true }
  for _, a in ipairs(over) do ignore[a] = true end
  local groups, order = {}, {}
  for _, row in ipairs(rows) do
    if row.metric == metric and row.split == split and row.step_kind == kind then
      local g = key_of(row, ignore)
      if not groups[g] then groups[g] = {}; order[#order + 1] = g end
      local sub = {}
      for _, a in ipairs(over) do sub[#sub + 1] = tostring(row[a]) end
      sub = table.concat(sub, "|")
      local e = groups[g][sub]
      if not e then
        e = { runs = {}, sum = 0, n = 0, over = {}, row = row }
        for _, a in ipairs(over) do e.over[a] = row[a] end
        groups[g][sub] = e
      end
      e.runs[#e.runs + 1] = row.run
      e.sum, e.n = e.sum + row.value, e.n + 1
    end
  end
  local chosen, selected = {}, {}
  for _, g in ipairs(order) do
    local best
    local subs = {}
    for k in pairs(groups[g]) do subs[#subs + 1] = k end
    table.sort(subs)
    for _, k in ipairs(subs) do
      local e = groups[g][k]
      e.value = e.sum / e.n
      if not best or e.value > best.value then best = e end
    end
    chosen[#chosen + 1] = { runs = best.runs, value = best.value, over = best.over, row = best.row }
    for _, id in ipairs(best.runs) do selected[id] = true end
  end
  return chosen, selected
end

--- The runs passing the paper's filter for one interchange label (docs/reproduction.md, "Model
--- selection and the filter"): mean original restored probability − mean corrupted restored
--- probability > threshold (0.01) at `step_kind`.
function results.filter(rows, label, threshold, step_kind)
  threshold, step_kind = threshold or 0.01, step_kind or "report"
  local pass = {}
  for _, row in ipairs(rows) do
    if row.metric == label .. ".attrib_den" and row.step_kind == step_kind and row.value > threshold then
      pass[row.run] = true
    end
  end
  return pass
end

return results
