--- Sweep definitions: a sweep file or table, with a profile applied and checked, expanded into
--- its runs with stable ids (docs/sweeps.md, "The sweep file").
local json = require "mech.json"
local train = require "mech.train"
local util = require "mech.util"

local definition = {}
local copy, closest = util.copy, util.closest

local fail = util.failer("sweep.")

local model_keys
local function get_model_keys()
  if not model_keys then
    model_keys = {}
    for k in pairs(mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 8 }:config()) do
      model_keys[k] = true
    end
    model_keys.seed = nil -- `seed` is train.run's (the model's seed follows it)
    model_keys.mixer = true -- a mixer written in Lua, named as data: its module (docs/nn.md)
  end
  return model_keys
end

local canonical_axes = { "task", "arch", "n_layers", "d_model", "d_conv", "pos_emb", "lr", "seed" }
local canonical_rank = {}
for i, a in ipairs(canonical_axes) do canonical_rank[a] = i end

local function axis_order(grid)
  local names = {}
  for k in pairs(grid) do names[#names + 1] = k end
  table.sort(names, function(a, b)
    local ra, rb = canonical_rank[a] or math.huge, canonical_rank[b] or math.huge
    if ra ~= rb then return ra < rb end
    return a < b
  end)
  return names
end

local def_keys = { name = 1, description = 1, base = 1, grid = 1, cell = 1, evaluators = 1, report_step = 1, select = 1,
  profiles = 1 }

-- The definition with a profile applied, checked.
function definition.resolve(def, profile, fn)
  if type(def) ~= "table" then fail(fn, "expected a sweep definition (a table), got " .. type(def), 4) end
  for k in pairs(def) do
    if not def_keys[k] then fail(fn, string.format("unknown key '%s' in the sweep definition (did you mean '%s'?)",
      tostring(k), closest(k, def_keys)), 4) end
  end
  if type(def.name) ~= "string" or not def.name:match("^[a-z0-9_]+$") then
    fail(fn, "the definition's 'name' expected a string of [a-z0-9_], got " .. tostring(def.name), 4)
  end
  local d = { name = def.name, description = def.description, base = copy(def.base or {}), grid = copy(def.grid or {}),
    cell = def.cell, evaluators = copy(def.evaluators or {}), report_step = def.report_step, select = copy(def.select) }
  local profiles = def.profiles or {}
  if profile == nil and profiles.paper then profile = "paper" end
  if profile ~= nil then
    local p = profiles[profile]
    if not p then
      local names = {}
      for k in pairs(profiles) do names[#names + 1] = k end
      table.sort(names)
      fail(fn, string.format("sweep '%s' has no profile '%s' (it has: %s)", def.name, tostring(profile),
        #names > 0 and table.concat(names, ", ") or "none"), 4)
    end
    for k, v in pairs(p.grid or {}) do d.grid[k] = copy(v) end
    d.base = util.deep_merge(d.base, p.base or {})
    for _, k in ipairs { "evaluators", "report_step", "select", "cell" } do
      if p[k] ~= nil then d[k] = copy(p[k]) end
    end
  end
  d.profile = profile
  -- a task object becomes its record (plain data: sweep.json keeps it, workers rebuild it)
  local function task_data(v)
    if type(v) ~= "userdata" or not tostring(v):match("^mech%.Task") then return v end
    local spec = v:spec()
    if spec.kind == "lua" and not spec.module then
      fail(fn, string.format("task '%s' was written in Lua without a module: a sweep names it by its module, task = "
        .. "{module = ..., name = ..., options = {...}} (docs/tasks.md, \"Your own task\")", spec.name), 5)
    end
    return spec
  end
  d.base.task = task_data(d.base.task)
  for i, v in ipairs(type(d.grid.task) == "table" and d.grid.task or {}) do d.grid.task[i] = task_data(v) end
  if next(d.grid) == nil then fail(fn, "the grid of sweep '" .. def.name .. "' is empty (no axes)", 4) end
  local known = train.config_keys()
  known.out, known.resume, known.lock, known.overwrite = nil, nil, nil, nil
  for k in pairs(get_model_keys()) do known[k] = true end
  for k, values in pairs(d.grid) do
    if not known[k] then
      fail(fn, string.format("unknown axis '%s' (did you mean '%s'?)", tostring(k), closest(k, known)), 4)
    end
    if type(values) ~= "table" or #values == 0 then
      fail(fn, string.format("axis '%s' expected a non-empty list of values, got %s", k,
        type(values) == "table" and "an empty list" or type(values)), 4)
    end
  end
  for k in pairs(d.base) do
    if not known[k] and k ~= "model" then
      fail(fn, string.format("unknown base option '%s' (did you mean '%s'?)", tostring(k), closest(k, known)), 4)
    end
  end
  for i, ev in ipairs(d.evaluators) do
    if ev.kind ~= "interchange" then
      fail(fn, string.format("evaluator %d: kind expected \"interchange\", got %s", i, tostring(ev.kind)), 4)
    end
  end
  return d
end

-- 64-bit FNV-1a of a string, as 16 hex digits (Lua integers wrap, as the hash wants).
local function fnv1a(s)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #s do
    h = h ~ s:byte(i)
    h = h * 1099511628211
  end
  return string.format("%016x", h)
end
definition.hash = fnv1a

local function number_text(v)
  if math.type(v) == "integer" then return tostring(v) end
  local t = string.format("%.6g", v):gsub("e%-0*", "e-"):gsub("e%+0*", "e")
  return t
end

function definition.task_text(v)
  if type(v) == "table" then
    local t = tostring(v.preset or v.name or v.module) -- a Lua task: {module, name, options}
    if v.seed then t = t .. "-t" .. v.seed end
    if v.rng then t = t .. "-" .. v.rng end
    return t
  end
  return tostring(v)
end

local slug_of = {
  task = definition.task_text,
  arch = tostring,
  n_layers = function(v) return "L" .. v end,
  d_model = function(v) return "d" .. v end,
  d_conv = function(v) return "k" .. v end,
  pos_emb = function(v) return v and "pe" or "nope" end,
  lr = function(v) return "lr" .. number_text(v) end,
  seed = function(v) return "s" .. v end,
}

local function slug(axes, order)
  local parts = {}
  for _, a in ipairs(order) do
    local v = axes[a]
    if v ~= nil then
      local f = slug_of[a]
      local text = f and f(v) or (a .. "=" .. (type(v) == "number" and number_text(v) or definition.task_text(v)))
      parts[#parts + 1] = text
    end
  end
  return (table.concat(parts, "-"):gsub("[^%w%.%-_=]", "_"))
end

local function total_steps(c)
  if c.steps then return c.steps end
  local d = train.default
  return ((c.train_docs or d("train_docs")) // (c.batch_size or d("batch_size"))) * (c.epochs or d("epochs"))
end

local function gcd(a, b) while b ~= 0 do a, b = b, a % b end return a end

-- The reported step: the largest step <= T that every evaluation cadence visits.
local function report_step(d, c)
  local T = total_steps(c)
  if type(d.report_step) == "number" then return math.min(d.report_step, T) end
  if type(d.report_step) == "function" then return d.report_step(T) end
  local l = c.eval_every or train.default("eval_every")
  for _, ev in ipairs(d.evaluators) do
    if ev.every then l = l // gcd(l, ev.every) * ev.every end
  end
  return T // l * l
end

-- The runs of a resolved definition: deterministic, in the canonical axis order.
function definition.expand(d, fn)
  local order = axis_order(d.grid)
  local cells = { {} }
  for _, a in ipairs(order) do
    local next_cells = {}
    for _, c in ipairs(cells) do
      for _, v in ipairs(d.grid[a]) do
        local n = copy(c)
        n[a] = copy(v)
        next_cells[#next_cells + 1] = n
      end
    end
    cells = next_cells
  end
  local mk = get_model_keys()
  local runs, by_hash = {}, {}
  for _, cell in ipairs(cells) do
    local keep = cell
    if d.cell then
      local r = d.cell(cell)
      if r == false then keep = nil elseif type(r) == "table" then keep = r end
    end
    if keep then
      local config = copy(d.base)
      config.model = copy(config.model or {})
      for k, v in pairs(keep) do
        if mk[k] then config.model[k] = copy(v) else config[k] = copy(v) end
      end
      config.threads = 1
      config.out, config.resume, config.quiet, config.progress = nil, nil, nil, nil
      local text = json.encode(config)
      local hash = fnv1a(text)
      local id = slug(keep, order) .. "-" .. hash:sub(1, 8)
      if by_hash[hash] then
        fail(fn, string.format("runs %s and %s have the same config (a cell override made them collide)",
          by_hash[hash], id), 4)
      end
      by_hash[hash] = id
      runs[#runs + 1] = { id = id, axes = keep, config = config, report_step = report_step(d, config),
        steps = total_steps(config) }
    end
  end
  if #runs == 0 then fail(fn, "sweep '" .. d.name .. "' has no runs (every cell was excluded)", 4) end
  return runs, order
end

function definition.read(file_or_table, fn)
  if type(file_or_table) == "table" then return file_or_table, nil end
  if type(file_or_table) ~= "string" then
    fail(fn, "argument 1 expected a sweep file path or a definition table, got " .. type(file_or_table), 4)
  end
  local path, missing = mech.find(file_or_table) -- here, else in mechlab's home (an installation)
  if not path then fail(fn, "no sweep file: " .. missing, 4) end
  local chunk, err = loadfile(path)
  if not chunk then fail(fn, err, 4) end
  file_or_table = path
  local ok, def = pcall(chunk)
  if not ok then fail(fn, file_or_table .. ": " .. tostring(def), 4) end
  return def, file_or_table
end

--- The expanded runs of a sweep file or definition, without touching disk:
--- {name, profile, runs = {{id, axes, config, report_step, steps}, ...}, axes = {names in order}}.
function definition.load(file_or_table, profile)
  local def = definition.read(file_or_table, "load")
  local d = definition.resolve(def, profile, "load")
  local runs, order = definition.expand(d, "load")
  return { name = d.name, profile = d.profile, description = d.description, runs = runs, axes = order,
    evaluators = d.evaluators, select = d.select }
end

return definition
