--- Two small tasks written in Lua, the examples of docs/tasks.md ("Your own task") and
--- experiments/own_task.lua. A module of tasks returns functions of plain options keyed by task
--- name, so a sweep file or a checkpoint names a task as {module = "mech.task_examples", name =
--- "copy", options = {...}} and mech.task.load rebuilds it.
local examples = {}

-- An integer option in [lo, hi] (default def), or an error naming it.
local function int_opt(o, key, def, lo, hi, fn)
  local v = o[key]
  if v == nil then return def end
  if math.type(v) ~= "integer" or v < lo or v > hi then
    error(string.format("%s: option '%s' expected an integer in %d..%d, got %s", fn, key, lo, hi, tostring(v)), 0)
  end
  return v
end

--- copy{n_symbols = 8, min_len = 2, max_len = 6}: <bos> s1 … sn = s1 … sn; every copied symbol is a
--- target. Positions: bos, the first symbol (query_item_orig, the "key" an interchange corrupts),
--- the divider and the first copy (query_item).
function examples.copy(o)
  local fn = "mech.task_examples.copy"
  local n_sym = int_opt(o, "n_symbols", 8, 2, 4096, fn)
  local lo = int_opt(o, "min_len", 2, 1, 1000, fn)
  local hi = int_opt(o, "max_len", math.max(lo, 6), lo, 1000, fn)
  local vocab = { "<pad>", "<bos>", "=" }
  for i = 0, n_sym - 1 do vocab[#vocab + 1] = "s" .. i end
  return mech.task.new {
    name = "copy", vocab = vocab, corrupt = { "s0", "s" .. (n_sym - 1) },
    positions = { "bos", "query_item_orig", "divider", "query_item" },
    sample = function(gen, split)
      local n = lo + gen:below(hi - lo + 1)
      local tokens = { 1 }
      for i = 1, n do tokens[i + 1] = 3 + gen:below(n_sym) end
      tokens[n + 2] = 2
      local targets = {}
      for i = 1, n do
        tokens[n + 2 + i] = tokens[i + 1]
        targets[i] = n + 1 + i
      end
      return { tokens = tokens, targets = targets,
        positions = { bos = 0, query_item_orig = 1, divider = n + 1, query_item = n + 2 } }
    end,
  }
end

--- modular_addition{p = 11, holdout = 0.2}: <bos> a + b = c with c = (a + b) mod p. The pair
--- (a, b) a test document holds never appears in training (holdout by the document's tokens).
--- Positions: a is query_item_orig, b target_item_orig, "=" the divider.
function examples.modular_addition(o)
  local p = int_opt(o, "p", 11, 2, 4096, "mech.task_examples.modular_addition")
  local vocab = { "<pad>", "<bos>", "+", "=" }
  for i = 0, p - 1 do vocab[#vocab + 1] = tostring(i) end
  local function id(x) return 4 + x end
  return mech.task.new {
    name = "modular_addition", vocab = vocab, corrupt = { "0", tostring(p - 1) }, holdout = o.holdout or 0.2,
    positions = { "bos", "query_item_orig", "target_item_orig", "divider" },
    sample = function(gen, split)
      local a, b = gen:below(p), gen:below(p)
      return { tokens = { 1, id(a), 2, id(b), 3, id((a + b) % p) }, targets = { 5 },
        positions = { bos = 0, query_item_orig = 1, target_item_orig = 3, divider = 4 } }
    end,
  }
end

return examples
