-- The paper, figure by figure: runs every sweep the requested figures need (once, shared between
-- figures; finished runs are skipped), draws the figures into DIR/figures and writes
-- DIR/figures/index.md. docs/reproduction.md lists the suites and figures.
--   mechlab experiments/paper.lua [--profile quick|paper|smoke] [--dir DIR] [--jobs N]
--                                 [--executor local|slurm|print] [--draw-only] [figure ...]
--   mechlab experiments/paper.lua --tables [--check]   (docs/reproduction.md's tables, from the committed rows)
--   mechlab experiments/paper.lua --results docs/results [--filter docs/img/reproduction/filter.csv] ...
--     draws from committed results CSVs (DIR/<sweep>-<profile>.csv, e.g. ar-quick.csv) instead of
--     sweep directories, running nothing; --filter names the runs that passed the 0.01 filter for
--     rows without denominators (plots/record_filter.lua)
--   mechlab experiments/paper.lua --help   (every option; the command line is parsed by lua-argparse)
local argparse = require "argparse"
local paper = require "mech.paper"
local sweep = require "mech.sweep"
local util = require "mech.util"

local function parser()
  local p = argparse("mechlab experiments/paper.lua", "The paper, figure by figure: runs the sweeps the figures "
    .. "need (each once; finished runs are skipped), draws the figures into DIR/figures and writes "
    .. "DIR/figures/index.md (docs/reproduction.md).")
  p:help_max_width(100)
  p:argument("figures", "Figures to draw (default: every one), e.g. fig3a fig6b."):args("*")
  p:option("--profile", "The sweeps' profile: quick, paper or smoke.", "quick")
  p:option("--dir", "Where the sweeps (DIR/sweeps/<name>) and figures (DIR/figures) go (default "
    .. "results/paper-<profile>).")
  p:option("--jobs", "Local worker processes (default: the number of cores)."):convert(function(text)
    local n = math.tointeger(tonumber(text))
    if not n or n < 1 then return nil, "--jobs expects a positive integer" end
    return n
  end)
  p:option("--executor", "Where the runs train.", "local"):choices { "local", "slurm", "print" }
  p:flag("--draw-only", "Draw from the sweeps as they are; run nothing.")
  p:option("--results", "Draw from the committed rows CSVDIR/<sweep>-<profile>.csv instead of sweep "
    .. "directories (implies --draw-only)."):argname("<csvdir>")
  p:option("--filter", "Take the 0.01 filter's passing runs from this CSV where the rows carry no "
    .. "denominators (plots/record_filter.lua)."):argname("<csv>")
  p:flag("--tables", "Rewrite the tables of docs/reproduction.md from docs/results/*.csv; nothing runs.")
  p:flag("--check", "With --tables: only list the tables that differ (exit status 1 if any).")
  return p
end

-- A usage error: the message and where the help is, on stderr, exit status 1 (no traceback).
local function fail(msg)
  io.stderr:write("mechlab experiments/paper.lua: " .. msg
    .. "\nRun 'mechlab experiments/paper.lua --help' for the usage.\n")
  os.exit(1)
end

local args = { ... }
-- the command as given, for the figure index: running it again does the same thing
local given = { "mechlab", "experiments/paper.lua" }
for _, a in ipairs(args) do
  given[#given + 1] = a:match("^[%w%./_=:,+-]+$") and a or util.shell_quote(a)
end
given = table.concat(given, " ")
local parsed, opts = parser():pparse(args)
if not parsed then fail(opts) end
local wanted = opts.figures
if opts.check and not opts.tables then fail("--check goes with --tables") end
if opts.tables then
  -- docs/reproduction.md's tables from the committed rows (lua/mech/paper/tables/); nothing runs
  local ok, msgs = require("mech.paper.tables.page").run { check = opts.check }
  for _, m in ipairs(msgs) do print(m) end
  if opts.check and ok then print("docs/reproduction.md: every table is in step with the committed rows") end
  os.exit(ok and 0 or 1)
end
local dir = opts.dir or ("results/paper-" .. opts.profile)

-- the figures, in the registry's order
local by_id, figures = {}, {}
for _, f in ipairs(paper.figures) do by_id[f.id] = f end
if #wanted == 0 then
  for _, f in ipairs(paper.figures) do figures[#figures + 1] = f end
else
  for _, id in ipairs(wanted) do
    if not by_id[id] then
      local ids = {}
      for _, f in ipairs(paper.figures) do ids[#ids + 1] = f.id end
      fail(string.format("unknown figure '%s' (the figures: %s)", id, table.concat(ids, " ")))
    end
    figures[#figures + 1] = by_id[id]
  end
end

-- the sweeps, each once
local names, seen = {}, {}
for _, f in ipairs(figures) do
  for _, s in ipairs(f.sweeps) do
    if not seen[s] then seen[s] = true; names[#names + 1] = s end
  end
end
local dirs = {}
for _, s in ipairs(names) do dirs[s] = dir .. "/sweeps/" .. s end
if opts.results then -- committed rows: ar -> CSVDIR/ar-quick.csv, mamba_conv -> mamba-conv-quick.csv
  opts.draw_only = true
  for _, s in ipairs(names) do dirs[s] = opts.results .. "/" .. s:gsub("_", "-") .. "-" .. opts.profile .. ".csv" end
end
if opts.filter then paper.use_recorded_filter(opts.filter) end

-- A figure's sweeps with its slices at this profile (mech.paper.figures): each slice's committed rows
-- CSVDIR/<sweep>-<slice>.csv, or its sweep directory DIR/sweeps/<sweep>-<slice> (not run from here:
-- `mechlab sweep run experiments/paper/<sweep>.lua --profile <slice> --dir` that directory), after the
-- profile's own rows, where it has results. Returns the dirs and the slices used.
local function figure_dirs(f)
  local slices, fd, used = f.slices[opts.profile], {}, {}
  if not slices then return dirs, used end
  for k, v in pairs(dirs) do fd[k] = v end
  for s, profiles in pairs(slices) do
    local list = { dirs[s] }
    for _, p in ipairs(profiles) do
      local at = opts.results and (opts.results .. "/" .. (s .. "-" .. p):gsub("_", "-") .. ".csv")
        or (dir .. "/sweeps/" .. s .. "-" .. p)
      if paper.has_results(at) then list[#list + 1], used[#used + 1] = at, s .. " " .. p end
    end
    fd[s] = list
  end
  table.sort(used)
  return fd, used
end

mech.sys.mkdir(dir)
mech.sys.mkdir(dir .. "/sweeps")
local failed_runs = 0
if not opts.draw_only then
  for _, s in ipairs(names) do
    local res = sweep.run(paper.sweep_file(s), { profile = opts.profile, dir = dirs[s], jobs = opts.jobs,
      executor = opts.executor })
    if res.signal then os.exit(res.signal == "SIGTERM" and 143 or 130) end
    if res.counts then failed_runs = failed_runs + res.counts.failed end
  end
  if opts.executor ~= "local" then
    print("the runs are submitted; draw the figures once they are done:\n  mechlab experiments/paper.lua --profile "
      .. opts.profile .. " --dir " .. dir .. " --draw-only " .. table.concat(wanted, " "))
    return
  end
end

-- Seconds since the epoch of an ISO-8601 UTC time ("2026-11-24T13:34:02Z").
local function iso_seconds(t)
  local y, mo, d, h, mi, s = tostring(t):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then return nil end
  return os.time { year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
    min = tonumber(mi), sec = tonumber(s) }
end

-- A sweep's run counts and wall time (first start to last end of its runs, and the sum of the
-- runs' own times: their manifests' wall_s, which adds up the segments of a resumed run), from
-- its manifests.
local function sweep_facts(s)
  if not mech.sys.exists(dirs[s] .. "/sweep.json") then return nil end
  local st = sweep.status(dirs[s])
  local first, last, total = nil, nil, 0
  for _, r in ipairs(st.runs) do
    local m = r.manifest
    local a, b = m and iso_seconds(m.start_time), m and iso_seconds(m.end_time)
    if a and b then
      first, last = math.min(first or a, a), math.max(last or b, b)
      total = total + math.floor(m.wall_s or b - a)
    end
  end
  return { total = st.total, done = st.counts.done, failed = st.counts.failed,
    span = first and (last - first) or 0, run_time = total }
end

local facts = {}
for _, s in ipairs(names) do facts[s] = sweep_facts(s) end

mech.sys.mkdir(dir .. "/figures")
local header = { "# The paper's figures, profile `" .. opts.profile .. "`", "",
  "Drawn by `mechlab experiments/paper.lua` from the sweeps under `" .. dir .. "/sweeps/`. Wall time: the",
  "span from a sweep's first run start to its last run end (Σ: the runs' own times added up); a sweep",
  "shared by several figures is counted in each.", "" }
local failures = {}
-- each figure's entry goes to DIR/figures/<id>.md; index.md gathers every entry there, so drawing
-- a few figures keeps the others' entries
for _, f in ipairs(figures) do
  local out = dir .. "/figures/" .. f.id .. ".png"
  local ok, recipe = pcall(dofile, paper.recipe_file(f.id))
  local keys, missing = nil, {}
  for _, s in ipairs(f.sweeps) do
    if not paper.has_results(dirs[s]) then missing[#missing + 1] = s end
  end
  -- a figure with some of its sweeps done is drawn with what there is (their panels empty), so
  -- that a suite can be looked at before the others have run
  local fdirs, slices_used = figure_dirs(f)
  if ok and #missing < #f.sweeps then
    local t0 = mech.sys.time()
    ok, keys = pcall(recipe.draw, fdirs, out)
    if ok then
      print(string.format("%s: %s (%.1f s)%s", f.id, out, mech.sys.time() - t0,
        #missing > 0 and ("; partial, no results yet for " .. table.concat(missing, ", ")) or ""))
    end
  elseif ok then
    ok, keys = false, "no results yet for " .. table.concat(missing, ", ")
  else
    keys = recipe
  end
  local index = {}
  index[#index + 1] = "## " .. f.id .. (ok and recipe.title and (": " .. recipe.title) or "")
  index[#index + 1] = ""
  if ok then
    index[#index + 1] = string.format("![%s](%s.png) ([CSV](%s.csv))", f.id, f.id, f.id)
  else
    failures[#failures + 1] = f.id
    index[#index + 1] = "**Not drawn:** " .. tostring(keys)
    io.stderr:write(f.id .. ": not drawn: " .. tostring(keys) .. "\n")
  end
  index[#index + 1] = ""
  index[#index + 1] = "- command: `" .. given .. "`"
  index[#index + 1] = "- profile: " .. opts.profile
  local runs, walls = 0, {}
  for _, s in ipairs(f.sweeps) do
    local x = facts[s]
    if x then
      runs = runs + x.total
      walls[#walls + 1] = string.format("%s %s (Σ %s; %d/%d done%s)", s, util.hms(x.span), util.hms(x.run_time), x.done,
        x.total, x.failed > 0 and string.format(", %d failed", x.failed) or "")
    end
  end
  index[#index + 1] = string.format("- runs: %d (sweeps: %s)", runs, table.concat(f.sweeps, ", "))
  if #slices_used > 0 then index[#index + 1] = "- with the slices: " .. table.concat(slices_used, ", ") end
  index[#index + 1] = "- wall time: " .. (#walls > 0 and table.concat(walls, "; ") or "none measured")
  if ok and #missing > 0 then
    index[#index + 1] = "- partial: no results yet for " .. table.concat(missing, ", ") .. " (its panels are empty)"
  end
  if ok then
    index[#index + 1] = "- key numbers:"
    for _, line in ipairs(keys) do index[#index + 1] = "  - " .. line end
  end
  index[#index + 1] = ""
  mech.sys.write_atomic(dir .. "/figures/" .. f.id .. ".md", table.concat(index, "\n"))
end
for _, f in ipairs(paper.figures) do
  header[#header + 1] = mech.sys.read_file(dir .. "/figures/" .. f.id .. ".md")
end
mech.sys.write_atomic(dir .. "/figures/index.md", table.concat(header, "\n"))
print(string.format("%d figures in %s/figures (index.md)%s", #figures - #failures, dir,
  #failures > 0 and ("; not drawn: " .. table.concat(failures, " ")) or ""))
if #failures > 0 or failed_runs > 0 then os.exit(1) end
