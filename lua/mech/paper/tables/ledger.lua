--- The claims ledger and its tally, as docs/reproduction.md shows them: every claim of claims.lua
--- judged by verdict.lua, its comparisons written out. Part of mech.paper.tables.
local F = require "mech.paper.tables.format"
local V = require "mech.paper.tables.verdict"
local claims = require "mech.paper.tables.claims"

local L = {}

--- Every claim judged, in the ledger's order: {claim, verdict, lines, near_chance}.
function L.judge(s)
  local out = {}
  for _, c in ipairs(claims) do
    local j = V.claim(c, s)
    j.claim = c
    out[#out + 1] = j
  end
  return out
end

-- what stands in the comparisons' column of a claim with none
local function why_none(j)
  if j.verdict == "paper scale only" then return "the paper makes it from d ≥ 128 only; mechlab has no run there" end
  if not j.claim.checks then return "no run of mechlab tests it: " .. j.claim.missing end
  return "a sweep it needs has not run"
end

--- The ledger's lines.
function L.ledger(s)
  local lines = { "| # | verdict | section | the paper's claim, in its words | the paper, d = 32 / 64 [source] | " ..
    "mechlab: each comparison (✓ holds, ✗ fails, ? cannot tell; the bound's source) |", "|---|---|---|---|---|---|" }
  for i, j in ipairs(L.judge(s)) do
    local comparisons = #j.lines > 0 and table.concat(j.lines, "; ") or why_none(j)
    if j.near_chance then comparisons = "(rests partly on single runs less than 0.05 above chance or the floor) " .. comparisons end
    lines[#lines + 1] = F.row { tostring(i), j.verdict, j.claim.section, j.claim.words, j.claim.paper or "–", comparisons }
  end
  return lines
end

--- The tally of the verdicts, computed from the ledger's rows.
function L.tally(s)
  local judged = L.judge(s)
  local lines = { "| verdict | claims | rows |", "|---|---|---|" }
  for _, t in ipairs(V.tally(judged)) do
    local rows = {}
    for _, i in ipairs(t[3]) do rows[#rows + 1] = tostring(i) end
    lines[#lines + 1] = F.row { t[1], tostring(t[2]), #rows > 0 and table.concat(rows, ", ") or "–" }
  end
  lines[#lines + 1] = F.row { "**all**", "**" .. #judged .. "**", "" }
  return lines
end

return L
