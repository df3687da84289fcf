--- Small tasks written in Lua, the examples of docs/tasks.md ("Your own task"),
--- experiments/own_task.lua and bench/bench_tasks.lua. A module of tasks returns functions of plain options keyed by task
--- name, so a sweep file or a checkpoint names a task as {module = "mech.task_examples", name =
--- "copy", options = {...}} and mech.task.load rebuilds it. mech.task.register declares them the module's
--- tasks: the only functions of it a record may name (docs/security.md).
local examples = {}

-- An integer option in [lo, hi] (default def), or an error naming it.
local function int_opt(o, key, def, lo, hi, fn)
  local v = o[key]
  if v == nil then return def end
  if math.type(v) ~= "integer" or v < lo or v > hi then
    error(string.format("%s: option '%s': expected an integer in %d..%d, got %s", fn, key, lo, hi, tostring(v)), 0)
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

--- associative_recall{n_keys = 4096, n_pairs = 16, batched = true}: AR written in Lua, with ar_32's
--- layout and positions: <bos> k v … (n_pairs pairs of distinct keys and distinct values) <eos> k v
--- <eos>, the answer v the target. batched = true draws whole batches with tensor ops
--- (sample_batch, the fast form for a fixed length); false one document at a time (sample). The
--- two forms have the same law, not the same documents.
function examples.associative_recall(o)
  local fn = "mech.task_examples.associative_recall"
  local K = int_opt(o, "n_keys", 4096, 2, 1 << 16, fn) -- K² below 2^32: one draw per pair
  local P = int_opt(o, "n_pairs", 16, 1, K, fn)
  local vocab = { "<pad>", "<bos>", "<eos>" }
  for i = 0, K - 1 do vocab[4 + i], vocab[4 + K + i] = "k" .. i, "v" .. i end
  local L, eos = 2 * P + 5, 2 * P + 1 -- the document's length, the position of the first <eos>
  local def = { name = "associative_recall", vocab = vocab, corrupt = { "k0", "k" .. (K - 1) },
    positions = { "bos", "query_item_orig", "target_item_orig", "divider", "query_item", "target_item", "next_key" } }
  if o.batched == false then
    local seen, stamp = {}, 0 -- seen[id] == stamp: id is in the current document (an array, reused)
    for id = 1, 2 * K + 3 do seen[id] = 0 end
    local KK, unpack = K * K, table.unpack
    local blank = { 1 } -- <bos> … <eos> _ _ <eos>: { unpack(blank) } is a table of the right size at once
    for i = 2, L do blank[i] = 0 end
    blank[eos + 1], blank[L] = 2, 2
    def.sample = function(gen)
      local t, below = { unpack(blank) }, gen.below
      stamp = stamp + 1
      for i = 1, P do
        local k, v
        repeat -- a (key, value) pair from one draw below K² (the same law as two draws)
          local r = below(gen, KK)
          k, v = 3 + r // K, 3 + K + r % K
        until seen[k] ~= stamp and seen[v] ~= stamp
        seen[k], seen[v] = stamp, stamp
        t[2 * i], t[2 * i + 1] = k, v
      end
      local q = below(gen, P)
      t[eos + 2], t[eos + 3] = t[2 * q + 2], t[2 * q + 3]
      return { tokens = t, targets = { eos + 2 }, positions = { bos = 0, query_item_orig = 2 * q + 1,
        target_item_orig = 2 * q + 2, divider = eos, query_item = eos + 1, target_item = eos + 2, next_key = 2 * q + 3 } }
    end
    return mech.task.new(def)
  end
  if P * (P - 1) > 2 * K then -- whole rows drawn at once: too few would come without a repeat
    error(string.format("%s: batched = true expects n_pairs * (n_pairs - 1) <= 2 * n_keys (got %d pairs of %d keys); "
      .. "use batched = false", fn, P, K), 0)
  end
  local i32 = { dtype = "int32" }
  local function repeats(x) -- per row, how many sorted neighbours are equal (0: all distinct)
    if P == 1 then return mech.zeros(x:shape()[1], i32) end
    local s = x:sort(1)
    return s[{ ":", "1:" }]:eq(s[{ ":", ":-1" }]):sum(1)
  end
  def.sample_batch = function(gen, split, n)
    local g = { generator = gen }
    local keys, values = mech.randint(0, K, n, P, g), mech.randint(0, K, n, P, g)
    -- a row that repeats a key or a value is dropped (the builder asks again for the missing
    -- documents): the law of drawing pairs until they are new, as sample does
    local bad = (repeats(keys) + repeats(values)):gt(0)
    local m = n - bad:sum():item()
    if m == 0 then return def.sample_batch(gen, split, n) end
    local rows = bad:argsort(0)[{ "0:" .. m }] -- a stable sort: the kept rows, in order
    keys, values = keys:index_select(0, rows) + 3, values:index_select(0, rows) + (3 + K)
    local q = mech.randint(0, P, m, 1, g)
    local tokens = mech.full({ m, L }, 2, i32) -- <eos> where nothing else goes
    tokens[{ ":", 0 }] = 1
    tokens[{ ":", "1:" .. eos .. ":2" }] = keys
    tokens[{ ":", "2:" .. eos .. ":2" }] = values
    tokens[{ ":", { eos + 1, eos + 2 } }] = keys:gather(1, q)
    tokens[{ ":", { eos + 2, eos + 3 } }] = values:gather(1, q)
    local kq = q:reshape(m) * 2 + 1 -- the queried key's position
    return { tokens = tokens, targets = { eos + 2 }, positions = { bos = 0, query_item_orig = kq,
      target_item_orig = kq + 1, divider = eos, query_item = eos + 1, target_item = eos + 2, next_key = kq + 2 } }
  end
  return mech.task.new(def)
end

--- two_hop{n_keys = 8, n_pairs = 3}: a 2-hop recall with position names of its own. <bos>, then
--- n_pairs links key -> bridge (k b), then the same bridges -> values (b v) in a shuffled order,
--- "=", a key of the first block; the answer is its bridge's value. Positions: bos,
--- query_item_orig (the queried key in the context), `bridge` (its bridge, right after it), `hop`
--- (the same bridge where it leads to the value), target_item_orig (that value), divider, query_item
--- and target_item (docs/tasks.md, "Position names").
function examples.two_hop(o)
  local fn = "mech.task_examples.two_hop"
  local K = int_opt(o, "n_keys", 8, 2, 4096, fn)
  local P = int_opt(o, "n_pairs", 3, 1, K, fn)
  local vocab = { "<pad>", "<bos>", "=" }
  for _, kind in ipairs { "k", "b", "v" } do
    for i = 0, K - 1 do vocab[#vocab + 1] = kind .. i end
  end
  local function key(i) return 3 + i end
  local function bridge(i) return 3 + K + i end
  local function value(i) return 3 + 2 * K + i end
  -- the first n entries of a random permutation of 0 .. m-1
  local function draw(gen, m, n)
    local a = {}
    for i = 1, m do a[i] = i - 1 end
    for i = 1, n do
      local j = i + gen:below(m - i + 1)
      a[i], a[j] = a[j], a[i]
    end
    return a
  end
  return mech.task.new {
    name = "two_hop", vocab = vocab, corrupt = { "k0", "k" .. (K - 1) },
    positions = { "bos", "query_item_orig", "bridge", "hop", "target_item_orig", "divider", "query_item", "target_item" },
    sample = function(gen, split)
      local ks, bs, vs, order = draw(gen, K, P), draw(gen, K, P), draw(gen, K, P), draw(gen, P, P)
      local q = gen:below(P) -- the queried pair (0-based)
      local tokens, hop = { 1 }, nil
      for i = 1, P do tokens[2 * i], tokens[2 * i + 1] = key(ks[i]), bridge(bs[i]) end
      for j = 1, P do
        local i = order[j] + 1
        tokens[2 * P + 2 * j], tokens[2 * P + 2 * j + 1] = bridge(bs[i]), value(vs[i])
        if i == q + 1 then hop = 2 * P + 2 * j - 1 end -- 0-based position of the bridge token
      end
      local div = 4 * P + 1
      tokens[div + 1], tokens[div + 2], tokens[div + 3] = 2, key(ks[q + 1]), value(vs[q + 1])
      return { tokens = tokens, targets = { div + 2 },
        positions = { bos = 0, query_item_orig = 1 + 2 * q, bridge = 2 + 2 * q, hop = hop, target_item_orig = hop + 1,
          divider = div, query_item = div + 1, target_item = div + 2 } }
    end,
  }
end

return mech.task.register(examples)
