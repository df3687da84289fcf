--- docs/reproduction.md's tables of numbers, generated from committed data (load.lua: the rows and
--- figure CSVs; stats.lua: the runs behind each table; render.lua: the tables of results;
--- claims.lua: the ledger). Each table sits on the page between `<!-- table: ID -->` and
--- `<!-- end table -->`; the prose around it is left alone.
---   mechlab experiments/paper.lua --tables           rewrites the tables in docs/reproduction.md
---   mechlab experiments/paper.lua --tables --check   lists the tables that differ from the data
local load = require "mech.paper.tables.load"
local S = require "mech.paper.tables.stats"
local tables = require "mech.paper.tables.render"

local T = {}
for _, k in ipairs { "results", "errors_file", "lrs", "slice_runs", "filter_csv", "figure_csvs", "hard_settings", "load" } do
  T[k] = load[k]
end
local fail = load.fail
local ledger = require "mech.paper.tables.ledger"
tables.claims, tables["claims-tally"] = ledger.ledger, ledger.tally

T.ids = { "atr-floors", "ar-accuracy", "ar-lr", "ar-bf16", "ar-mamba-seeds", "ar-attrib", "mamba-conv-accuracy", "mamba-conv-attrib", "next-key", "next-key-best-lr",
  "based-accuracy",
  "atr-easy", "atr-hard-accuracy", "atr-hard-epochs", "atr-hard-attrib", "atr-split-accuracy", "atr-split-attrib", "delta-net", "atr-mamba-conv",
  "ar-layers", "ar-mixer-output", "atr-1layer", "sibling", "claims-tally", "claims" }

--- Every table's text (its lines joined), by id.
function T.render(d)
  local s = S.compute(d)
  local out = {}
  for _, id in ipairs(T.ids) do out[id] = table.concat(tables[id](s), "\n") end
  return out
end

--- The page with each marked table replaced; also the ids whose text changed, and the ids the
--- page marks that no generator makes and those it lacks.
function T.apply(page, rendered)
  local changed, unknown, seen = {}, {}, {}
  local out = page:gsub("(<!%-%- table: ([%w%-]+) %-%->\n)(.-)(<!%-%- end table %-%->)", function(open, id, body, close)
    seen[id] = true
    local text = rendered[id]
    if not text then unknown[#unknown + 1] = id; return nil end
    text = "\n" .. text .. "\n\n" -- blank lines: the comments and the table are separate blocks
    if text ~= body then changed[#changed + 1] = id end
    return open .. text .. close
  end)
  local missing = {}
  for _, id in ipairs(T.ids) do if not seen[id] then missing[#missing + 1] = id end end
  return out, changed, unknown, missing
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then fail(tostring(err)) end
  local s = f:read("a")
  f:close()
  return s
end

--- Regenerates docs/reproduction.md's tables under root: with check, only compares. Returns true
--- when the page is (now) in step, and a list of messages (each differing, unknown or missing table).
function T.run(opts)
  opts = opts or {}
  local root = opts.root or "."
  local path = root .. "/docs/reproduction.md"
  local page = read(path)
  local out, changed, unknown, missing = T.apply(page, T.render(T.load(root)))
  local msgs = {}
  for _, id in ipairs(changed) do
    msgs[#msgs + 1] = "table '" .. id .. (opts.check and "' differs from the committed data" or "' rewritten")
  end
  for _, id in ipairs(unknown) do msgs[#msgs + 1] = "table '" .. id .. "' is marked on the page but no generator makes it" end
  for _, id in ipairs(missing) do msgs[#msgs + 1] = "table '" .. id .. "' has no marker on the page" end
  if not opts.check and #changed > 0 then
    local f = assert(io.open(path, "wb"))
    f:write(out)
    f:close()
    return #unknown + #missing == 0, msgs
  end
  return #msgs == 0, msgs
end

return T