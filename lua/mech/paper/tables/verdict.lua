--- The one code path that judges the ledger: each claim of claims.lua is a list of comparisons
--- (a cell against a bound or another cell), each comparison holds, fails or cannot be told
--- apart from noise, and the claim's verdict follows from its comparisons by one rule:
---   a cell is missing                          not run (paper scale only: a claim the paper makes
---                                              from d >= 128 only, and no mechlab run at that width)
---   every comparison holds                     agrees
---   some hold, the others fail or cannot tell  agrees in part
---   none holds, none fails                     cannot tell at quick scale
---   none holds, some fail                      disagrees
--- A comparison cannot tell when the two numbers are closer than twice their combined standard
--- error (cell.se: binomial for an accuracy; the delta method for one run's Attrib where its rows
--- or FILE-attrib-se.csv give it; means of Attrib over runs and counts carry none), or when its cells were
--- trained for very different numbers of epochs (more than 1.5 times apart: atr_hard's 5 against
--- the paper's 32). A claim of success on ATR fails where the accuracy is within twice its
--- error of the setting's floor (floors.lua): the run has not shown retrieval; two cells both on
--- their floor cannot be ranked (they can still be equal). Part of
--- mech.paper.tables.
local F = require "mech.paper.tables.format"

local V = {}

V.labels = { "agrees", "agrees in part", "disagrees", "cannot tell at quick scale", "paper scale only", "not run" }

-- the text of a cell: its label and value (± its SE where it has one; a layer or a position as is)
local function show(c, close)
  if type(c.v) ~= "number" then return c.label .. " " .. tostring(c.v) end
  local digits = c.digits or close or (c.se and 3 or 2)
  local text = c.label .. " " .. F.num(c.v, digits)
  if c.se then text = text .. " ± " .. F.num(c.se, digits) end
  return text
end

-- a bound or a second cell as the comparison writes it
-- the digits a comparison decided in the third or fourth digit is written with (false: the usual)
local function close_call(check)
  local b = type(check.b) == "table" and check.b.v or check.b
  if type(check.a.v) ~= "number" or type(b) ~= "number" then return false end
  local edge = math.min(math.abs(math.abs(check.a.v - b) - (check.tol or 0)), math.abs(check.a.v - b))
  return edge < 0.0005 and 4 or edge < 0.005 and 3 or false
end

local function rhs(check, close)
  if check.op == "in" then
    local parts = {}
    for _, x in ipairs(check.b) do parts[#parts + 1] = tostring(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  if type(check.b) == "table" then return show(check.b, close) end
  if type(check.b) == "number" then return F.num(check.b, check.a and check.a.digits or close or 2) end
  return tostring(check.b)
end

local function se_of(c) return type(c) == "table" and c.se or 0 end
local function value_of(b) return type(b) == "table" and b.v or b end

-- does a cell sit on its floor: within twice its error of it (or below)
local function on_floor(c) return c.floor ~= nil and c.v - c.floor <= 2 * (c.se or 0) end

-- "yes", "no" or "?" for one comparison whose cells are resolved, and a note
local function judge(check)
  local a, b = check.a, check.b
  if type(b) == "table" and a.epochs and b.epochs and math.max(a.epochs, b.epochs) > 1.5 * math.min(a.epochs, b.epochs) then
    return "?", string.format("trained for %d and %d epochs", a.epochs, b.epochs)
  end
  local op = check.op
  if op == "in" then
    for _, x in ipairs(b) do if x == a.v then return "yes" end end
    return "no"
  end
  if op == "is" then return a.v == b and "yes" or "no" end
  if op == "on floor" or op == "above floor" then
    if not a.floor then return "?", "no floor" end
    return (on_floor(a) == (op == "on floor")) and "yes" or "no", "floor " .. F.num(a.floor, 3)
  end
  local diff = a.v - value_of(b)
  local noise = 2 * math.sqrt(se_of(a) ^ 2 + se_of(b) ^ 2)
  local succeeds = op == ">=" or op == ">" or op == ">~"
  -- a claim of success needs retrieval: at the floor it fails; two cells both at their floor
  -- cannot be ranked by retrieval
  if succeeds and type(b) ~= "table" and on_floor(a) then return "no", "at the floor " .. F.num(a.floor, 3) end
  if op ~= "~" and type(b) == "table" and on_floor(a) and on_floor(b) then return "?", "both at the floor " .. F.num(a.floor, 3) end
  if op == "~" then -- within tol of each other; the noise counts for the claim
    local tol = check.tol or 0
    if math.abs(diff) <= tol + noise then return "yes" end
    return "no"
  end
  if op == ">~" then -- matches or beats: not below by more than the noise
    return diff >= -noise and "yes" or "no"
  end
  if math.abs(diff) <= noise then return "?", "within twice the error" end
  if op == ">=" or op == ">" then return diff > 0 and "yes" or "no" end
  if op == "<" or op == "<=" then return diff < 0 and "yes" or "no" end
  error("verdict: unknown comparison " .. tostring(op))
end

local mark = { yes = "✓", no = "✗", ["?"] = "?" }
local op_text = { [">="] = "≥", [">"] = ">", ["<"] = "<", ["<="] = "≤", ["~"] = "≈", [">~"] = "≥ (or within noise of)",
  ["on floor"] = "at or below its floor", ["above floor"] = "above its floor", ["in"] = "in", ["is"] = "is" }

--- Judges one claim: {verdict = label, lines = {comparison texts}, results = {"yes"|"no"|"?"}}.
--- claim.checks(s) gives the comparisons, each {op, a = cell, b = cell or bound, tol, src}; a
--- cell is nil where its runs are missing.
function V.claim(claim, s)
  local checks = claim.checks and claim.checks(s) or {}
  local missing = #checks == 0
  for _, c in ipairs(checks) do
    if not c.a or (c.needs_b ~= false and c.b == nil) then missing = true end
  end
  if missing then
    return { verdict = claim.scale == "paper" and "paper scale only" or "not run", lines = {}, results = {} }
  end
  local counts, lines, results, near_chance = { yes = 0, no = 0, ["?"] = 0 }, {}, {}, false
  for _, c in ipairs(checks) do
    local r, note = judge(c)
    counts[r], results[#results + 1] = counts[r] + 1, r
    local close = c.needs_b ~= false and c.op ~= "in" and close_call(c)
    local text = show(c.a, close) .. " " .. op_text[c.op] .. (c.needs_b == false and "" or " " .. rhs(c, close))
    if c.op == "~" and c.tol and c.tol > 0 then text = text .. " within " .. F.num(c.tol, 2) end
    if c.src then text = text .. " (" .. c.src .. ")" end
    lines[#lines + 1] = mark[r] .. " " .. text .. (note and " [" .. note .. "]" or "")
    for _, x in ipairs { c.a, c.b } do
      if type(x) == "table" and x.se and x.runs == 1 and x.v - (x.floor or 0) < 0.05 then near_chance = true end
    end
  end
  local verdict
  if counts.no == 0 and counts["?"] == 0 then verdict = "agrees"
  elseif counts.yes > 0 then verdict = "agrees in part"
  elseif counts.no == 0 then verdict = "cannot tell at quick scale"
  else verdict = "disagrees" end
  return { verdict = verdict, lines = lines, results = results, near_chance = near_chance }
end

--- The number of claims per verdict label, in V.labels' order: {{label, count, rows}}.
function V.tally(judged)
  local by = {}
  for i, j in ipairs(judged) do
    by[j.verdict] = by[j.verdict] or {}
    table.insert(by[j.verdict], i)
  end
  local out = {}
  for _, label in ipairs(V.labels) do out[#out + 1] = { label, #(by[label] or {}), by[label] or {} } end
  return out
end

return V
