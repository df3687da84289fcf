-- MQAR (Zoology's multi-query associative recall): the original's datasets reproduced in numpy
-- mode (tests/fixtures/mqar_reference_seed1.jsonl, six settings at seed 1), the layout and gap law
-- in philox mode, per-query readouts in batches and training, options and their errors.
local T = require "check"
local json = require "mech.json"

T.test("rng = numpy: the original's six datasets at seed 1, token for token (keys, values, gaps, labels)", function()
  local settings = 0
  for line in io.lines("tests/fixtures/mqar_reference_seed1.jsonl") do
    local r = json.decode(line)
    T.eq(r.random_non_queries, false)
    local task = mech.task.mqar { vocab_size = r.vocab_size, input_seq_len = r.input_seq_len,
      num_kv_pairs = r.num_kv_pairs, power_a = r.power_a, num_passes = r.num_passes, random_non_queries = false,
      rng = "numpy" }
    local ds = task:dataset(r.num_examples, { seed = r.seed, split = "train" })
    local tokens, targets = ds:batch(0, r.num_examples)
    T.eq(tokens:shape(), { r.num_examples, r.input_seq_len })
    local bad, queries = 0, 0
    for i = 1, r.num_examples do
      local doc = ds:doc(i - 1)
      for p = 1, r.input_seq_len do
        if tokens:get(i - 1, p - 1) ~= r.inputs[i][p] or targets:get(i - 1, p - 1) ~= r.labels[i][p] then
          bad = bad + 1
        end
        if r.labels[i][p] ~= -100 then queries = queries + 1 end
      end
      -- every query is a readout: its position and its answer
      T.eq(#doc.readouts, r.num_kv_pairs)
      for j, q in ipairs(doc.readouts) do T.eq(r.labels[i][q + 1], doc.answers[j]) end
    end
    T.eq(bad, 0, string.format("(%d, %d, %d, power_a %g)", r.vocab_size, r.input_seq_len, r.num_kv_pairs, r.power_a))
    T.eq(queries, r.num_examples * r.num_kv_pairs)
    settings = settings + 1
  end
  T.eq(settings, 6)
end)

T.test("random fillers change only the zeros, uniformly over the vocabulary, reproducibly", function()
  local opts = { vocab_size = 64, input_seq_len = 32, num_kv_pairs = 4, rng = "numpy", random_non_queries = false }
  local plain = mech.task.mqar(opts):dataset(256, { seed = 1 })
  opts.random_non_queries = true
  local filled = mech.task.mqar(opts):dataset(256, { seed = 1 })
  local a, ta = plain:batch(0, 256)
  local b, tb = filled:batch(0, 256)
  T.eq((ta - tb):abs():max():item(), 0)
  local zeros, changed, seen = 0, 0, {}
  for i = 0, 255 do
    for p = 0, 31 do
      local x, y = a:get(i, p), b:get(i, p)
      if x == 0 then zeros = zeros + 1; seen[y] = true else T.eq(y, x) end
      if x ~= y then changed = changed + 1 end
    end
  end
  local distinct = 0
  for _ in pairs(seen) do distinct = distinct + 1 end
  T.truthy(distinct == 64, "every token appears as a filler: " .. distinct)
  T.truthy(changed > 0.95 * zeros)
  local again = mech.task.mqar(opts):dataset(256, { seed = 1 }):batch(0, 256)
  T.eq((again - b):abs():max():item(), 0)
end)

T.test("philox mode: the layout, distinct keys and values, queries after the context, the gap law", function()
  local task = mech.task.mqar { vocab_size = 128, input_seq_len = 64, num_kv_pairs = 8, num_passes = 2,
    random_non_queries = false, seed = 3 }
  T.eq(task:kind(), "mqar")
  T.eq(task:vocab_size(), 128)
  local ds = task:dataset(200, { seed = 5, split = "test" })
  local first_gap = 0
  for i = 0, 199 do
    local d = ds:doc(i)
    local keys, vals = {}, {}
    for p = 0, 15, 2 do
      local k, v = d.tokens[p + 1], d.tokens[p + 2]
      T.truthy(k >= 1 and k < 64 and v >= 64 and v < 128)
      keys[k], vals[v] = v, true
      T.eq(d.tokens[p + 17], k) -- the second pass repeats the pairs
      T.eq(d.tokens[p + 18], v)
    end
    T.eq(#d.readouts, 8)
    local n = 0
    for _ in pairs(vals) do n = n + 1 end
    T.eq(n, 8)
    for j, q in ipairs(d.readouts) do
      T.truthy(q >= 32 and (q - 32) % 2 == 0)
      T.eq(keys[d.tokens[q + 1]], d.answers[j]) -- the key asked, and its value as the answer
      if j > 1 then T.truthy(q > d.readouts[j - 1]) end
    end
    T.eq(d.positions.query_item, d.readouts[1])
    T.eq(d.tokens[d.positions.query_item_orig + 1], d.tokens[d.positions.query_item + 1])
    T.eq(d.positions.target_item - 1, d.readouts[1])
    if d.readouts[1] == 32 then first_gap = first_gap + 1 end
  end
  -- power_a = 0.01 puts most of the mass on gap 0
  T.truthy(first_gap > 150, "gap 0 in " .. first_gap .. " of 200 documents")
  -- batches: a target at every query, the answer at each
  local tokens, targets = ds:batch(0, 4)
  local n = 0
  for b = 0, 3 do for p = 0, 63 do if targets:get(b, p) ~= -100 then n = n + 1 end end end
  T.eq(n, 32)
  -- deterministic per seed, different across splits
  local again = task:dataset(200, { seed = 5, split = "test" }):batch(0, 4)
  T.eq((again - tokens):abs():max():item(), 0)
  local train_tokens = task:dataset(4, { seed = 5, split = "train" }):batch(0, 4)
  T.truthy((train_tokens - tokens):abs():max():item() > 0)
  local shown = ds:show(0)
  T.truthy(shown:find("readouts (answer)", 1, true), shown)
  T.eq(mech.task.show(ds:doc(0)), shown) -- the document table carries its readouts
  local d0 = ds:doc(0)
  d0.readouts, d0.answers = { "x" }, { 1 }
  T.raises(function() mech.task.show(d0) end, "(readouts[1] expected an integer position, got string)")
  T.eq(task:to_str_tokens({ 0, 1, 64, 127 }), { "_", "k1", "v0", "v63" })
end)

T.test("presets, the record and training per query", function()
  for _, name in ipairs { "mqar_64_4", "mqar_128_8", "mqar_256_16", "mqar_512_64" } do
    local t = mech.task.preset(name, 1)
    local c = t:config()
    T.eq(string.format("mqar_%d_%d", c.input_seq_len, c.num_kv_pairs), name)
    T.eq(c.vocab_size, 8192)
    T.eq(c.random_non_queries, true)
    T.eq(mech.task.from_spec(t:spec()):spec(), t:spec())
  end
  T.eq(mech.task.preset("mqar_64_4", 1, { rng = "numpy" }):config().rng, "numpy")
  -- experiments/mqar.lua's smoke mode: three mixers, every query of the 32 test documents scored
  local saved = arg
  arg = { "smoke=true" }
  local ok, results = pcall(dofile, "experiments/mqar.lua")
  arg = saved
  T.truthy(ok, results)
  T.eq(#results, 3)
  for _, r in ipairs(results) do
    T.eq(r.n, 32 * 4)
    T.eq(math.type(r.attrib.target_item_orig), "float")
  end
end)

T.test("bad options are errors naming the option", function()
  T.raises(function() mech.task.mqar { input_seq_len = 63 } end, "input_seq_len must be an even number")
  T.raises(function() mech.task.mqar { vocab_size = 64, input_seq_len = 64 } end, "vocab_size must be > input_seq_len")
  T.raises(function() mech.task.mqar { num_kv_pairs = 20, input_seq_len = 64 } end,
    "num_kv_pairs * 2 * num_passes + num_kv_pairs * 2 must be <= input_seq_len")
  T.raises(function() mech.task.mqar { num_passes = 0 } end, "num_passes must be >= 1")
  T.raises(function() mech.task.mqar { power_a = 0 } end, "power_a must be a number > 0")
  T.raises(function() mech.task.mqar { rng = "torch" } end, "option 'rng':? expected one of 'philox', 'numpy', got 'torch'")
  T.raises(function() mech.task.mqar { vocab = 64 } end, "vocab")
  T.raises(function() mech.task.mqar { num_kv_pairs = "four" } end, "num_kv_pairs")
  T.raises(function() mech.task.mqar { rng = "numpy" }:sample(1) end, "draws whole datasets")
  T.raises(function() mech.task.mqar { rng = "numpy" }:dataset(4, { seed = 1 << 40 }) end, "below 2^32")
end)


T.test("interchange: every query is an example, read at its own row with its own key and value", function()
  local ic = require "mech.interchange"
  local train = require "mech.train"
  local task = mech.task.mqar { vocab_size = 32, input_seq_len = 16, num_kv_pairs = 2, random_non_queries = false }
  local r = train.run { model = { arch = "attention", d_model = 16, n_layers = 2, state_mixer = "mlp" }, task = task,
    train_docs = 64, eval_docs = 8, batch_size = 8, steps = 3, quiet = true, seed = 3 }
  local m, ds = r.model, task:dataset(5, { seed = 9, split = "test" })
  local res = ic.evaluate(m, ds, { layers = { 0 }, components = { "block_input" }, batch = 3 })
  -- the examples in order: document by document, query by query
  local ex = {}
  for i = 0, #ds - 1 do
    local d = ds:doc(i)
    for j, q in ipairs(d.readouts) do ex[#ex + 1] = { doc = i, row = q, ans = d.answers[j], tokens = d.tokens } end
  end
  T.eq(#ex, 10)
  T.eq(res.corrupt_token:shape(), { res.n_combos, 10 })
  local function prob(tokens, row, ans)
    local t = mech.tensor(tokens, { dtype = "int32" }):view(1, #tokens)
    local lp = m:forward(t)[0]:log_softmax(-1)
    return math.exp(lp:get(row, ans))
  end
  for e, x in ipairs(ex) do
    T.near(res.original_prob:get(0, e - 1), prob(x.tokens, x.row, x.ans), 1e-5, "original " .. e)
  end
  -- corrupting the query's key in the context (label type query_item_orig): by hand
  for k, c in ipairs(res.combos) do
    if c.label_type == "query_item_orig" then
      for e, x in ipairs(ex) do
        local key = x.tokens[x.row + 1]
        local at
        for p = 0, 3, 2 do if x.tokens[p + 1] == key then at = p end end
        local tok = table.move(x.tokens, 1, #x.tokens, 1, {})
        local new = res.corrupt_token:get(k - 1, e - 1)
        T.truthy(new >= 1 and new <= 15 and new ~= key, "a key other than the query's")
        tok[at + 1] = new
        T.near(res.corrupted_prob:get(k - 1, e - 1), prob(tok, x.row, x.ans), 1e-5, "corrupted " .. e)
      end
    end
  end
end)

T.done()
