--- Numbers and text as docs/reproduction.md writes them. Part of mech.paper.tables.
local paper = require "mech.paper"

local F = {}

local function g9(v) return string.format("%.9g", v) end

-- a number as the page writes it (a true minus sign)
local function num(v, digits)
  return (string.format("%." .. (digits or 2) .. "f", v):gsub("^%-", "−"))
end

local function mean_of(values) return (paper.mean_sd(values)) end

-- "mean ± sd" (several values), the value (one) or "–" (none)
local function ms(values, digits)
  if #values == 0 then return "–" end
  local m, sd = paper.mean_sd(values)
  if #values == 1 then return num(m, digits) end
  return num(m, digits) .. " ± " .. num(sd, digits)
end

local function row(cells) return "| " .. table.concat(cells, " | ") .. " |" end

-- a paragraph as the page's source wraps it (100 columns), appended to lines
local function para(lines, text)
  local line = ""
  for word in text:gmatch("%S+") do
    if line ~= "" and utf8.len(line) + 1 + utf8.len(word) > 100 then lines[#lines + 1] = line; line = word
    else line = line == "" and word or (line .. " " .. word) end
  end
  if line ~= "" then lines[#lines + 1] = line end
  return lines
end

-- a learning rate as the page writes it (3e-4, 1e-3, ...)
local function lr_str(lr) return (string.format("%.0e", lr):gsub("e%-0", "e-")) end

--- The binomial standard error of a proportion p over n documents, sqrt(p(1 - p) / n).
function F.se(p, n) return math.sqrt(math.max(p * (1 - p), 0) / n) end

--- The accuracy of runs (each with accuracy and n) and its standard error: the mean over the runs,
--- the error over all their documents (the runs' sampling noise; the seeds' spread is the sd).
function F.acc_se(runs)
  local sum, docs = 0, 0
  for _, e in ipairs(runs) do sum, docs = sum + e.accuracy * e.n, docs + e.n end
  local p = 0
  for _, e in ipairs(runs) do p = p + e.accuracy end
  p = p / #runs
  return p, F.se(p, docs), docs
end

--- An accuracy as the page writes it: "p ± SE" for one run, "p ± SE (sd s)" for the mean of
--- several; "–" for none. The ± is always the binomial standard error.
function F.acc(runs, digits)
  local list = {}
  for _, e in ipairs(runs) do if e and e.accuracy then list[#list + 1] = e end end
  if #list == 0 then return "–" end
  local p, se = F.acc_se(list)
  local text = num(p, digits or 3) .. " ± " .. num(se, digits or 3)
  if #list > 1 then
    local values = {}
    for _, e in ipairs(list) do values[#values + 1] = e.accuracy end
    text = text .. " (sd " .. num(select(2, paper.mean_sd(values)), digits or 3) .. ")"
  end
  return text
end

--- One run's accuracy (nil or no accuracy: "–").
function F.acc1(e, digits) return F.acc({ e }, digits) end

F.g9, F.num, F.mean_of, F.ms, F.row, F.para, F.lr_str = g9, num, mean_of, ms, row, para, lr_str

return F
