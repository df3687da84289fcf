--- A task made outside C, as C holds it (src/tasks/custom.c: vocabulary, names, declared
--- positions, corruption pool, holdout) and as Lua holds it: its definition `d`, the task
--- userdata's user value. What every kind of such task shares: the checks of its options, the
--- making of its C task, and the record of the task mech.task.load is making.
local C = require "mech.task_c"
local util = require "mech.util"

local D = {}

function D.fail(fn, msg) error(fn .. ": " .. msg, 0) end
local fail = D.fail

--- The Lua definition of a task made outside C (nil for a built-in task).
function D.of(task) return (debug.getuservalue(task, 1)) end

--- The paper's position names, as a set.
D.position_set = {}
for _, p in ipairs(mech.task.positions) do D.position_set[p] = true end
-- A task's positions: the paper's eight (slots 0..7) and free names after them (docs/tasks.md,
-- "Position names"); C keeps ML_MAX_POS = 64 slots in all.
local MAX_POSITIONS, NAME_BYTES = 64, 31

-- Checks option 'positions' (a list of names) with messages that name the entry.
local function check_positions(fn, positions)
  if type(positions) ~= "table" then fail(fn, "option 'positions': expected a list of position names") end
  local seen, n_free = {}, 0
  for i, p in ipairs(positions) do
    if type(p) ~= "string" then
      fail(fn, string.format("option 'positions' entry %d: expected a position name (a string), got %s", i, type(p)))
    end
    if seen[p] then fail(fn, string.format("option 'positions' lists '%s' twice (entries %d and %d)", p, seen[p], i)) end
    seen[p] = i
    if not D.position_set[p] then
      if not p:match("^[%a_][%w_]*$") or #p > NAME_BYTES then
        fail(fn, string.format("option 'positions' entry %d is '%s': a position name is one of the paper's (%s) or "
          .. "an identifier of your own (letters, digits and '_', not starting with a digit, at most %d bytes)", i, p,
          table.concat(mech.task.positions, ", "), NAME_BYTES))
      end
      if p == "all_target_items_orig" then
        fail(fn, "option 'positions' entry " .. i .. " is 'all_target_items_orig', a document field, not a position name")
      end
      n_free = n_free + 1
    end
  end
  if n_free > MAX_POSITIONS - #mech.task.positions then
    fail(fn, string.format("option 'positions' names %d positions of its own, at most %d (%d slots in all, the "
      .. "paper's %d first)", n_free, MAX_POSITIONS - #mech.task.positions, MAX_POSITIONS, #mech.task.positions))
  end
end

--- Checks that options are plain data: checkpoints, manifests and sweep.json record them as JSON.
function D.check_data(v, where, fn, depth)
  local t = type(v)
  if t == "table" then
    if (depth or 0) > 32 then fail(fn, where .. " is nested too deeply") end
    for k, x in pairs(v) do
      if type(k) ~= "string" and math.type(k) ~= "integer" then
        fail(fn, string.format("%s has a key of type %s; options must be plain data", where, type(k)))
      end
      D.check_data(x, where .. "." .. tostring(k), fn, (depth or 0) + 1)
    end
  elseif t ~= "string" and t ~= "number" and t ~= "boolean" then
    fail(fn, string.format("%s is a %s; a task's options must be plain data (strings, numbers, booleans, tables) "
      .. "so that checkpoints and sweep.json can record them", where, t))
  end
end

--- Fails naming the first key of opts not in the set `keys` (with the closest one).
function D.check_keys(fn, opts, keys)
  for k in pairs(opts) do
    if not keys[k] then
      fail(fn, string.format("unknown option '%s' (did you mean '%s'?)", tostring(k), util.closest(k, keys)))
    end
  end
end

-- The module, options and seed of the task mech.task.load is making (its record); empty outside.
local loading = {}

--- The record of the task being loaded ({module, options, seed}; empty outside mech.task.load).
function D.loading() return loading end

--- pcall(f, options) with `record` as the task being loaded.
function D.call_loading(record, f, options)
  local saved = loading
  loading = record
  local ok, task = pcall(f, options)
  loading = saved
  return ok, task
end

--- The C task of a definition (common to Lua and file tasks). def: the user's options; d: the
--- definition kept as the task's user value, completed here.
function D.make(fn, kind, name, def, d)
  if type(name) ~= "string" or not name:match("^[%w_%.%-]+$") or #name > 31 then
    fail(fn, "option 'name': expected a name of at most 31 letters, digits, '_', '.' or '-', got " .. tostring(name))
  end
  local vocab, names, ids, V = def.vocab, nil, nil, nil
  if type(vocab) == "table" then
    names, ids = {}, {}
    for i, s in ipairs(vocab) do
      if type(s) ~= "string" or s == "" or s:find("%s") then
        fail(fn, string.format("option 'vocab' entry %d expected a token name (a string without spaces), got %s", i,
          tostring(s)))
      end
      if ids[s] then fail(fn, string.format("option 'vocab' names '%s' twice (entries %d and %d)", s, ids[s] + 1, i)) end
      names[i], ids[s] = s, i - 1
    end
    V = #names
    if V == 0 then fail(fn, "option 'vocab': expected a non-empty list of token names") end
  elseif math.type(vocab) == "integer" and vocab >= 1 then
    V = vocab
  else
    fail(fn, "option 'vocab': expected a vocabulary size (an integer >= 1) or a list of token names, got "
      .. tostring(vocab))
  end
  local positions = def.positions or {}
  check_positions(fn, positions)
  local function token_id(v, what)
    if math.type(v) == "integer" and v >= 0 and v < V then return v end
    if type(v) == "string" and ids and ids[v] then return ids[v] end
    fail(fn, string.format("option 'corrupt' %s expected a token id in 0..%d%s, got %s", what, V - 1,
      ids and " or a token name" or "", tostring(v)))
  end
  local lo, hi = -1, -1
  if def.corrupt ~= nil then
    if type(def.corrupt) ~= "table" or #def.corrupt ~= 2 then
      fail(fn, "option 'corrupt': expected {lo, hi}: the token ids (or names) a corrupted position draws from")
    end
    lo, hi = token_id(def.corrupt[1], "lo"), token_id(def.corrupt[2], "hi")
  end
  local holdout = def.holdout or 0
  if type(holdout) ~= "number" or not (holdout >= 0 and holdout < 1) then
    fail(fn, "option 'holdout': expected a fraction in [0, 1), got " .. tostring(holdout))
  end
  local seed = loading.seed or def.seed or 42
  if math.type(seed) ~= "integer" then fail(fn, "option 'seed': expected an integer, got " .. tostring(seed)) end
  d.kind, d.seed, d.names, d.ids, d.V = kind, seed, names, ids, V
  d.positions, d.holdout = util.copy(positions), holdout
  return C.custom(name, seed, names or V, positions, lo, hi, holdout, d)
end

return D
