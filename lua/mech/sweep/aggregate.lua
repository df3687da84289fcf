--- Aggregation: DIR/results.csv (tidy long form), DIR/curves.csv and DIR/summary.txt from the run
--- directories, mostly by concatenating the rows each worker cached when its run ended.
local json = require "mech.json"
local util = require "mech.util"
local definition = require "mech.sweep.definition"
local store = require "mech.sweep.store"
local csv = require "mech.csv"

local aggregate = {}
local read_file = store.read_data

local fixed_columns = { "task", "arch", "n_layers", "d_model", "d_conv", "pos_emb", "lr", "seed", "steps" }

local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "boolean" then return tostring(v) end
  if type(v) == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    if v ~= v then return "nan" end
    return (json.encode(v))
  end
  if type(v) == "table" then v = definition.task_text(v) end
  return csv.quote(v)
end

-- A run's values of the fixed columns and its other axes.
local function run_columns(s, r, m)
  local c, model = r.config, (m and m.model) or {}
  local v = {
    task = r.axes.task or c.task, arch = c.model.arch or model.arch, n_layers = c.model.n_layers or model.n_layers,
    d_model = c.model.d_model or model.d_model, d_conv = c.model.d_conv or model.d_conv,
    pos_emb = c.model.pos_emb, lr = c.lr, seed = c.seed, steps = r.steps,
  }
  if v.pos_emb == nil then v.pos_emb = model.pos_emb end
  if v.arch ~= "mamba" and v.d_conv == nil then v.d_conv = nil end
  return v
end

-- metrics.csv as text (a regular file within the bound); values stay text (written once, in
-- the shortest exact form).
aggregate.max_metrics = 1 << 30
local function read_metrics(path) return read_file(path, aggregate.max_metrics) or "" end

-- A file written in pieces and renamed into place when whole (mech.sys.atomic: a fresh
-- temporary file, O_EXCL and O_NOFOLLOW, removed if anything fails): aggregate's outputs reach
-- hundreds of MB at the paper's scale, too much to build as one string first. Writes are
-- gathered in 1 MB pieces.
local function stream(path)
  local f = mech.sys.atomic(path)
  local buf, size = {}, 0
  local function flush()
    f:write(table.concat(buf))
    buf, size = {}, 0
  end
  return {
    write = function(_, ...)
      for i = 1, select("#", ...) do
        local t = select(i, ...)
        buf[#buf + 1], size = t, size + #t
      end
      if size >= 1 << 20 then flush() end
    end,
    commit = function() flush(); f:commit() end,
    abort = function() f:abort() end,
  }
end

-- The metrics of curves.csv: the training loss and the evaluation's accuracy, loss and prob.
local curve_metric = { accuracy = true, loss = true, prob = true }

-- One run's rows, without the run's own columns: its curve lines (as in metrics.csv) and its
-- result lines `split,metric,step_kind,step,value` — per split the reported, final and best
-- (highest accuracy) steps, each with its summary and interchange metrics.
local function extract_rows(text, report_step)
  local curves, by_split = {}, {} -- by_split: split -> step -> metric -> value (text)
  for _, rec in ipairs(csv.parse(text, "metrics.csv")) do
    -- a row: an integer step (anchored: "-5" is -5, the header is no row) and three more fields
    local step, split, metric, value = csv.integer(rec[1]), rec[2], rec[3], rec[4]
    if not (step and value and #rec == 4) then
      -- the header, or a row cut off by a crash: not a value
    elseif split ~= "train" then
      if curve_metric[metric] then curves[#curves + 1] = step .. "," .. csv.line { split, metric, value } end
      local st = by_split[split]
      if not st then st = {}; by_split[split] = st end
      local vals = st[step]
      if not vals then vals = {}; st[step] = vals end
      vals[metric] = value
    elseif metric == "loss" then
      curves[#curves + 1] = step .. "," .. csv.line { split, metric, value }
    end
  end
  local out, report_acc = {}, nil
  local splits = {}
  for split in pairs(by_split) do splits[#splits + 1] = split end
  table.sort(splits)
  for _, split in ipairs(splits) do
    local steps = by_split[split]
    local final, best, best_acc = nil, nil, -math.huge
    local list = {}
    for step in pairs(steps) do list[#list + 1] = step end
    table.sort(list)
    for _, step in ipairs(list) do
      local acc = csv.number(steps[step].accuracy)
      if acc then
        final = step
        if acc > best_acc then best, best_acc = step, acc end
      end
    end
    local kinds = {}
    if steps[report_step] and steps[report_step].accuracy then kinds[#kinds + 1] = { "report", report_step } end
    if final then kinds[#kinds + 1] = { "final", final } end
    if best then kinds[#kinds + 1] = { "best", best } end
    for _, k in ipairs(kinds) do
      local kind, step = k[1], k[2]
      local vals = steps[step]
      if kind == "report" and split == "test" then report_acc = csv.number(vals.accuracy) end
      local head, tail = csv_field(split) .. ",", "," .. kind .. "," .. step .. ","
      local function row(name, value) out[#out + 1] = head .. csv.quote(name) .. tail .. csv.quote(value) .. "\n" end
      for _, name in ipairs { "accuracy", "loss", "prob" } do
        if vals[name] then row(name, vals[name]) end
      end
      -- interchange metrics where they were measured (the reported step, or every N steps)
      local labels = {}
      for name in pairs(vals) do
        local label = name:match("^(%d+%..+)%.prob_diff$")
        if label then labels[#labels + 1] = label end
      end
      table.sort(labels)
      for _, label in ipairs(labels) do
        local rest = label:match("^%d+%.(.*)$")
        local o, c = csv.number(vals["original." .. rest .. ".restored_prob"]), csv.number(vals["corrupted." .. rest .. ".restored_prob"])
        if vals[label .. ".attrib"] then row(label .. ".attrib", vals[label .. ".attrib"]) end
        if vals[label .. ".attrib_se"] then row(label .. ".attrib_se", vals[label .. ".attrib_se"]) end
        if o and c then row(label .. ".attrib_den", csv_field(o - c)) end
        row(label .. ".prob_diff", vals[label .. ".prob_diff"])
        if vals[label .. ".restored_prob"] then row(label .. ".restored_prob", vals[label .. ".restored_prob"]) end
      end
    end
  end
  return curves, out, #out, report_acc
end

-- The rows (each a whole CSV line, which may hold a quoted line break) with prefix before each.
local function prefix_lines(prefix, rows)
  if #rows == 0 then return "" end
  return prefix .. table.concat(rows, prefix)
end

-- runs/<id>/rows.cache holds a finished run's rows of curves.csv and results.csv as aggregate
-- writes them, so that aggregating a sweep is mostly concatenation: the worker writes it when
-- its run ends (in parallel, on the cluster's nodes too), and aggregate uses it while
-- metrics.csv keeps the size it was made from and the run's columns are unchanged.
-- Layout: "mechlab-rows 2 <metrics bytes> <report step> <test accuracy there or -> <curve
-- bytes> <result rows>", the curve prefix, the result prefix (a line each), the curve rows, the
-- result rows.
local cache_magic = "mechlab-rows 2"
local cache_head = "^mechlab%-rows 2 (%d+) (%-?%d+) (%S+) (%d+) (%d+)\n([^\n]*)\n([^\n]*)\n()"

local function file_size(path) return mech.sys.file_size(path) or 0 end

-- The axes that are columns beyond the fixed ones, sorted.
local function extra_axes(s)
  local fixed, extra = {}, {}
  for _, a in ipairs(fixed_columns) do fixed[a] = true end
  for _, a in ipairs(s.axes) do if not fixed[a] then extra[#extra + 1] = a end end
  table.sort(extra)
  return extra
end

-- A run's rows of curves.csv and results.csv, its state, manifest and test accuracy at the
-- reported step. Rows of finished runs come from runs/<id>/rows.cache, which the worker writes
-- (write_cache); aggregate itself writes nothing in the run directories.
function aggregate.run_rows(dir, s, r, write_cache)
  local state, m = store.run_state(dir, r.id)
  local cols, extra = run_columns(s, r, m), s.extra or extra_axes(s)
  local prefix = { csv_field(s.name), csv_field(r.id), state }
  for _, a in ipairs(fixed_columns) do prefix[#prefix + 1] = csv_field(cols[a]) end
  for _, a in ipairs(extra) do prefix[#prefix + 1] = csv_field(r.axes[a]) end
  local cprefix = { csv_field(s.name), csv_field(r.id), csv_field(cols.arch), csv_field(cols.d_model),
    csv_field(cols.lr), csv_field(cols.seed) }
  for _, a in ipairs(extra) do cprefix[#cprefix + 1] = csv_field(r.axes[a]) end
  prefix, cprefix = table.concat(prefix, ",") .. ",", table.concat(cprefix, ",") .. ","
  local finished = state == "done" or state == "failed"

  local rdir = store.check_inside(dir, store.run_dir(dir, r.id), "aggregate")
  local size = file_size(rdir .. "/metrics.csv")
  local cached = finished and read_file(rdir .. "/rows.cache", 2 * aggregate.max_metrics)
  if cached then
    local bytes, step, acc, ncurve, nresult, cp, rp, body = cached:match(cache_head)
    if bytes and tonumber(bytes) == size and tonumber(step) == r.report_step and cp == cprefix and rp == prefix then
      ncurve = tonumber(ncurve)
      return { curves = cached:sub(body, body + ncurve - 1), results = cached:sub(body + ncurve),
        n = tonumber(nresult), acc = tonumber(acc), state = state, manifest = m }
    end
  end
  local text = read_metrics(rdir .. "/metrics.csv")
  if text ~= "" and text:sub(-1) ~= "\n" then text = text .. "\n" end
  local curves, results, n, acc = extract_rows(text, r.report_step)
  curves, results = prefix_lines(cprefix, curves), prefix_lines(prefix, results)
  if finished and write_cache then
    local head = string.format("%s %d %d %s %d %d\n%s\n%s\n", cache_magic, size, r.report_step,
      acc and string.format("%.17g", acc) or "-", #curves, n, cprefix, prefix)
    mech.sys.write_atomic(rdir .. "/rows.cache", head .. curves .. results)
  end
  return { curves = curves, results = results, n = n, acc = acc, state = state, manifest = m }
end

--- Writes DIR/results.csv (tidy long form), DIR/curves.csv and DIR/summary.txt from the run
--- directories; returns the number of rows of results.csv.
function aggregate.write(dir)
  local s = store.read(dir, "aggregate")
  s.extra = extra_axes(s)
  local header = { "sweep", "run", "status" }
  for _, a in ipairs(fixed_columns) do header[#header + 1] = a end
  for _, a in ipairs(s.extra) do header[#header + 1] = a end
  local curve_header = { "sweep", "run", "arch", "d_model", "lr", "seed" }
  for _, a in ipairs(s.extra) do curve_header[#curve_header + 1] = a end
  for _, h in ipairs { "step", "split", "metric", "value" } do curve_header[#curve_header + 1] = h end
  for _, h in ipairs { "split", "metric", "step_kind", "step", "value" } do header[#header + 1] = h end

  if mech.sys.exists(dir .. "/runs") then store.check_inside(dir, dir .. "/runs", "aggregate") end
  local results, curves, summary, n = stream(dir .. "/results.csv"), nil, {}, 0
  local ok, err = pcall(function()
    curves = stream(dir .. "/curves.csv")
    results:write(table.concat(header, ","), "\n")
    curves:write(table.concat(curve_header, ","), "\n")
    for _, r in ipairs(s.runs) do
      local rows = aggregate.run_rows(dir, s, r)
      curves:write(rows.curves)
      results:write(rows.results)
      n = n + rows.n
      summary[#summary + 1] = { id = r.id, state = rows.state, acc = rows.acc, m = rows.manifest }
    end
    results.commit()
    curves.commit()
  end)
  if not ok then -- no temporary file stays behind (an abort after a commit does nothing)
    results.abort()
    if curves then curves.abort() end
    error(err, 0)
  end

  local counts = { done = 0, running = 0, failed = 0, interrupted = 0, pending = 0 }
  local lines = { string.format("sweep %s, profile %s: %d runs", s.name, s.profile or "default", #s.runs) }
  local width = 3
  for _, e in ipairs(summary) do
    counts[e.state] = counts[e.state] + 1
    width = math.max(width, #e.id)
  end
  lines[#lines + 1] = store.counts_line(counts, #s.runs)
  lines[#lines + 1] = ""
  -- padded by hand: string.format's widths stop at 99, and ids may be longer
  local function pad(t) return t .. string.rep(" ", width - #t) end
  lines[#lines + 1] = string.format("%s  %-11s  %13s  %8s", pad("run"), "status", "test acc@rep", "wall")
  for _, e in ipairs(summary) do
    local wall = e.m and math.type(e.m.wall_s) and util.clock(e.m.wall_s) or "-"
    lines[#lines + 1] = string.format("%s  %-11s  %13s  %8s", pad(e.id), e.state,
      e.acc and string.format("%.4f", e.acc) or "-", wall)
  end
  mech.sys.write_atomic(dir .. "/summary.txt", table.concat(lines, "\n") .. "\n")
  return n
end

return aggregate
