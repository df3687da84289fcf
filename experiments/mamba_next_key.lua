-- v3's next-key claim (spec §9.2) inside Mamba's mixer: the short conv moves the key to the
-- next key's position (2q + 3), and restoring that position at layer 0 restores the most. The
-- sweeps' evaluation patches the block-level sites only (plots/paper/v3_next_key.lua draws
-- them); this one reruns the interchange evaluation on every finished Mamba run's report
-- checkpoint at layer 0 with the mixer-internal sites (the conv output `mixer.conv`, the SSM's
-- input `mixer.u`, its state, ...), the key corrupted, and gives the mean Attrib per conv width,
-- site and position over the runs that pass the 0.01 filter.
--   mechlab experiments/mamba_next_key.lua SWEEP_DIR ... [out=mamba_next_key] [best_lr=true] [n=DOCS]
-- writes OUT_runs.csv (one row per run, site and position) and OUT.png (the means as a heatmap,
-- with their CSV, OUT.csv). best_lr=true keeps, per conv width and model width, the runs at the
-- learning rate with the best mean test accuracy in the sweeps' rows (the paper's model
-- selection, as Fig. 3a takes it). n= evaluates DOCS test documents of each run (at most its
-- eval_docs, which is the default and what the committed tables use): a quicker look.
local ic = require "mech.interchange"
local json = require "mech.json"
local paper = require "mech.paper"
local sweep = require "mech.sweep"
local train = require "mech.train"

local usage = "usage: mechlab experiments/mamba_next_key.lua SWEEP_DIR ... [out=mamba_next_key] [best_lr=true] [n=DOCS]"
local dirs, out, best_lr, n_docs = {}, "mamba_next_key", false, nil
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if k == "out" then out = v
  elseif k == "best_lr" then
    if v ~= "true" and v ~= "false" then error(usage .. "\n(best_lr= expects true or false, got '" .. v .. "')", 0) end
    best_lr = v == "true"
  elseif k == "n" then
    n_docs = math.tointeger(tonumber(v))
    if not n_docs or n_docs < 1 then error(usage .. "\n(n= expects a count >= 1, got '" .. v .. "')", 0) end
  elseif k then error(usage .. "\n(unknown option '" .. k .. "=')", 0)
  else dirs[#dirs + 1] = a end
end
if #dirs == 0 then error(usage, 0) end

local positions = paper.next_key_positions

-- with best_lr: the ids of the runs to evaluate (filled below), else nil (every run)
local keep

local function done_mamba_runs(dir)
  local st = sweep.status(dir)
  local list = {}
  for _, r in ipairs(st.runs) do
    local c = r.manifest and r.manifest.config
    if r.state == "done" and c and c.model.arch == "mamba" and not c.model.pos_emb and (not keep or keep[r.id]) then
      list[#list + 1] = { dir = dir .. "/runs/" .. r.id, id = r.id, config = c }
    end
  end
  return list
end

-- with best_lr: the runs at the best learning rate per (conv width, model width)
if best_lr then
  keep = {}
  local named, names = {}, {}
  for i, dir in ipairs(dirs) do named[i], names[i] = dir, i end
  local best = paper.best_per_width(paper.rows(named, names), { where = function(r) return r.arch == "mamba" and not r.pos_emb end,
    group = function(r) return r.d_conv or 4 end })
  for conv, by_d in pairs(best) do
    for d, e in pairs(by_d) do
      print(string.format("conv %s, d = %d: the best lr %g (test accuracy %.3f, %d runs)", tostring(conv), d, e.lr, e.mean,
        #e.runs))
      for _, id in ipairs(e.runs) do keep[id] = true end
    end
  end
end

-- by[conv][site][position] = {Attrib of each run}, of the runs that pass the filter and of all
local rows, by, by_all = {}, {}, {}
local sites, seen_site, convs, seen_conv = {}, {}, {}, {}
local t0, n_runs = mech.sys.time(), 0
for _, dir in ipairs(dirs) do
  for _, run in ipairs(done_mamba_runs(dir)) do
    local c = run.config
    local conv = c.model.d_conv or 4
    local ds = train.make_task(c):dataset(n_docs and math.min(n_docs, c.eval_docs) or c.eval_docs,
      { seed = c.seed, split = "test" })
    local model = mech.load(run.dir .. "/checkpoint-report.safetensors")
    local res = ic.evaluate(model, ds, { layers = { 0 }, mixer_sites = true, label_types = { "query_item_orig" }, seed = 42 })
    for _, p in ipairs(positions) do
      for name in pairs(res.by_name) do
        local site = name:match("^0%.KEY%.query_item_orig%." .. p[1] .. "%.(.+)%.attrib$")
        if site then
          local a, pass = ic.attrib(res, "0.KEY.query_item_orig." .. p[1] .. "." .. site)
          rows[#rows + 1] = { run.id, conv, c.model.d_model, c.lr, c.seed, res.accuracy, site, p[1], a, pass }
          if not seen_conv[conv] then seen_conv[conv] = true; convs[#convs + 1] = conv end
          if not seen_site[site] then seen_site[site] = true; sites[#sites + 1] = site end
          for _, t in ipairs(pass and { by, by_all } or { by_all }) do
            t[conv] = t[conv] or {}
            t[conv][site] = t[conv][site] or {}
            t[conv][site][p[1]] = t[conv][site][p[1]] or {}
            table.insert(t[conv][site][p[1]], a)
          end
        end
      end
    end
    n_runs = n_runs + 1
    print(string.format("%s: accuracy %.3f (%.1f s)", run.id, res.accuracy, res.seconds))
  end
end
if #rows == 0 then error("mamba_next_key.lua: no finished Mamba run without positions in " .. table.concat(dirs, ", "), 0) end

table.sort(rows, function(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  if x[7] ~= y[7] then return x[7] < y[7] end
  return x[8] < y[8]
end)
local csv = { "run,d_conv,d_model,lr,seed,accuracy,site,position,attrib,passes" }
for _, r in ipairs(rows) do
  csv[#csv + 1] = string.format("%s,%d,%d,%g,%d,%.6g,%s,%s,%.6g,%s", r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
    tostring(r[10]))
end
mech.sys.write_atomic(out .. "_runs.csv", table.concat(csv, "\n") .. "\n")

-- the heatmap: a row per site, a column per (conv width, position); the mean over the runs that
-- pass the filter (over all runs when none does: untrained models)
local filtered = next(by) ~= nil
if not filtered then by = by_all end
table.sort(convs)
table.sort(sites)
-- each column's label carries its run count (the runs behind its cells; a range when the filter
-- keeps different runs at different sites); a cell no run reaches is hatched and the note says why
local data, xlabels, mask = {}, {}, {}
for _, conv in ipairs(convs) do
  for _, p in ipairs(positions) do
    local lo, hi = math.huge, 0
    for _, site in ipairs(sites) do
      local v = by[conv] and by[conv][site] and by[conv][site][p[1]]
      lo, hi = math.min(lo, v and #v or 0), math.max(hi, v and #v or 0)
    end
    xlabels[#xlabels + 1] = string.format("conv %d %s (%s)", conv, p[2], lo == hi and tostring(hi) or (lo .. "-" .. hi))
  end
end
local extreme = 0
for i, site in ipairs(sites) do
  data[i], mask[i] = {}, {}
  for _, conv in ipairs(convs) do
    for _, p in ipairs(positions) do
      local v = by[conv] and by[conv][site] and by[conv][site][p[1]]
      local m = v and (paper.mean_sd(v)) or 0 / 0
      data[i][#data[i] + 1], mask[i][#mask[i] + 1] = m, v == nil
      if m == m then extreme = math.max(extreme, math.abs(m)) end
    end
  end
end
-- the colour scale spans the data, symmetric about 0 and rounded up to a tenth: never narrower
-- than the values it colours
local span = math.max(1, math.ceil(extreme * 10 - 1e-9) / 10)
mech.plot.heatmap { data = data, xlabels = xlabels, ylabels = sites, center = 0, vmin = -span, vmax = span, values = true,
  digits = 2, mask = mask, mask_note = filtered and "no run passes the 0.01 filter at this site and position" or
    "no run evaluated here",
  title = "Mamba, AR, layer 0: Attrib (key corrupted), mean over " .. (filtered and "the runs passing the filter (n)" or
    "all runs (none passes the filter) (n)"), colorbar = "Attrib",
  out = out .. ".png" }
print(string.format("%d runs in %.0f s; %s_runs.csv, %s.png", n_runs, mech.sys.time() - t0, out, out))
for _, conv in ipairs(convs) do
  local at = by[conv] and by[conv]["mixer.conv"]
  local n = at and at.next_key and #at.next_key or 0
  local line = {}
  for _, p in ipairs(positions) do
    local v = at and at[p[1]]
    line[#line + 1] = string.format("%s %s", p[2], v and paper.fmt_mean(v, 2) or "-")
  end
  print(string.format("conv %d, mixer.conv (%d runs): %s", conv, n, table.concat(line, ", ")))
end
