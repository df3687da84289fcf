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

F.g9, F.num, F.mean_of, F.ms, F.row, F.para, F.lr_str = g9, num, mean_of, ms, row, para, lr_str

return F
