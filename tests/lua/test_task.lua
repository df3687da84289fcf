-- mech.task: constructors, documents, datasets, batches, printing and option errors.
local T = require "check"

T.test("presets exist and report their vocabulary", function()
  local names = mech.task.presets()
  for _, n in ipairs {"pcfg_5_20", "pcfg_10_20", "pcfg_easy_8192", "pcfg_tts", "sibling", "ar_32", "ar_32_value"} do
    local found = false
    for _, m in ipairs(names) do found = found or m == n end
    T.truthy(found, n)
  end
  T.eq(mech.task.preset("ar_32"):vocab_size(), 8196) -- the V = 8196 quirk
  T.eq(mech.task.preset("pcfg_5_20"):vocab_size(), 26)
  T.eq(mech.task.preset("pcfg_easy_8192"):vocab_size(), 8198)
  T.eq(mech.task.preset("pcfg_5_20"):kind(), "atr")
  T.eq(mech.task.preset("ar_32"):name(), "ar_32")
  T.truthy(mech.task.preset("pcfg_tts"):has_split())
  T.falsy(mech.task.preset("pcfg_5_20"):has_split())
end)

T.test("an ATR document: layout, 0-based positions, the parent answer", function()
  local t = mech.task.preset("pcfg_5_20", 42)
  for seed = 1, 50 do
    local d = t:sample(seed)
    local p, tok = d.positions, d.tokens
    T.eq(#tok, d.len)
    T.eq(tok[1], 1) -- <bos> at position 0
    local n = d.stats.yield_len
    T.eq(d.len, n + 5)
    T.eq(p.bos, 0)
    T.eq(p.divider, n + 1)
    T.eq(p.query_item, n + 2)
    T.eq(p.target_item, n + 3)
    T.eq(tok[p.query_item + 1], tok[p.query_item_orig + 1])
    T.eq(tok[p.target_item + 1], tok[p.target_item_orig + 1])
    T.eq(d.tree.parent[p.query_item_orig + 1], p.target_item_orig) -- the answer is the parent
    T.truthy(p.target_item_orig > p.query_item_orig, "right heads")
    T.eq(p.all_target_items_orig, {p.target_item_orig})
    T.eq(p.query_type, nil)
    T.eq(d.type, "PARENT")
    T.eq(d.task, t)
  end
end)

T.test("an AR document: 16 pairs, key query, next_key", function()
  local t = mech.task.preset("ar_32", 42)
  local d = t:sample(7)
  T.eq(d.len, 37)
  local q = (d.positions.query_item_orig - 1) // 2
  T.eq(d.positions.query_item_orig, 2 * q + 1)
  T.eq(d.positions.target_item_orig, 2 * q + 2)
  T.eq(d.positions.next_key, 2 * q + 3)
  T.eq(d.positions.divider, 33)
  T.eq(d.positions.query_item, 34)
  T.eq(d.positions.target_item, 35)
  T.eq(d.type, "KEY")
  T.eq(t:token_name(d.tokens[2]):sub(1, 1), "k")
  T.eq(t:token_name(d.tokens[3]):sub(1, 1), "v")
  local v = mech.task.preset("ar_32_value"):sample(7)
  T.eq(v.type, "VALUE")
  T.eq(v.positions.target_item_orig + 1, v.positions.query_item_orig)
  local lo, hi = mech.task.preset("ar_32_value"):corrupt_range()
  T.eq({lo, hi}, {4099, 8194})
end)

T.test("token names", function()
  local t = mech.task.preset("ar_32")
  T.eq(t:token_name(0), "<pad>")
  T.eq(t:token_name(1), "<bos>")
  T.eq(t:token_name(2), "<eos>")
  T.eq(t:token_name(3), "k0")
  T.eq(t:token_name(4099), "v0")
  T.eq(mech.task.preset("pcfg_5_20"):token_name(5), "t2")
  T.eq(mech.task.atr{child = true}:token_name(23), "qPARENT")
end)

T.test("determinism: the same seed gives the same document, sample(seed) = dataset doc 0", function()
  local t = mech.task.preset("pcfg_10_20", 3)
  T.eq(t:sample(5).tokens, t:sample(5).tokens)
  T.eq(mech.task.preset("pcfg_10_20", 3):sample(5).tokens, t:sample(5).tokens)
  T.truthy(not T.equal(t:sample(5).tokens, t:sample(6).tokens))
  local ds = t:dataset(3, {seed = 5, split = "test"})
  T.eq(ds:doc(0).tokens, t:sample(5, "test").tokens)
  -- without a seed, successive samples differ; a Generator is advanced
  T.truthy(not T.equal(t:sample().tokens, t:sample().tokens))
  if mech.Generator then
    local g1, g2 = mech.Generator(9), mech.Generator(9)
    T.eq(t:sample(g1).tokens, t:sample(g2).tokens)
  end
end)

T.test("dataset batches: padding, shifted targets, positions", function()
  local t = mech.task.preset("pcfg_5_20", 42)
  local ds = t:dataset(64, {seed = 1})
  T.eq(#ds, 64)
  T.eq(ds:split(), "train")
  local tokens, targets, pos = ds:batch(8, 4)
  T.eq(tokens:shape(), targets:shape())
  local B, L = tokens:shape()[1], tokens:shape()[2]
  T.eq(B, 4)
  local maxlen = 0
  for b = 0, 3 do
    local d = ds:doc(8 + b)
    maxlen = math.max(maxlen, d.len)
    for p = 0, L - 1 do
      local x, y = tokens:get(b, p), targets:get(b, p)
      T.eq(x, p < d.len and d.tokens[p + 1] or 0)
      if p == d.positions.target_item - 1 then
        T.eq(y, d.tokens[d.positions.target_item + 1]) -- the answer, predicted one step early
      else
        T.eq(y, -100)
      end
    end
    T.eq(pos.query_item[b + 1], d.positions.query_item)
    T.eq(pos.next_key[b + 1], -1)
    T.eq(pos.all_target_items_orig[b + 1], d.positions.all_target_items_orig)
  end
  T.eq(L, maxlen)
  local ptab = ds:positions(8, 4)
  T.eq(ptab:shape(), {4, #mech.task.positions})
  T.eq(ds:target_dist(0, 2):shape(), {2, 26})
  local a = ds:batch_at {3, 3}
  T.eq(a:shape()[1], 2)
  T.raises(function() ds:batch(62, 4) end, "count in 1..2")
  T.raises(function() ds:batch(64, 1) end, "0..63")
  T.raises(function() ds:batch_at {0, 99} end, "0..63")
  T.raises(function() ds:doc(-1) end, "document index")
end)

T.test("printing shows the tree and marks the probing positions", function()
  local t = mech.task.preset("pcfg_5_20", 42)
  local d = t:sample(11)
  local s = t:show(d)
  T.truthy(s:find("tree", 1, true), s)
  T.truthy(s:find("<query_item_orig", 1, true), s)
  T.truthy(s:find("<target_item_orig", 1, true), s)
  T.eq(mech.task.show(d), s)
  local ds = t:dataset(2, {seed = 11})
  T.eq(ds:show(0), s)
  -- a damaged document is an error naming the field, never a crash (ml_doc_check judges it)
  d.tree.parent[3] = 1e6
  T.raises(function() t:show(d) end, "bad argument #1 to 'task:show' (tree.parent at position 2 = 1000000 is")
  d.tree.parent[3] = d.tree.parent[2]
  T.eq(type(t:show(d)), "string")
  d.positions.query_item = -5
  T.raises(function() t:show(d) end, "(position 'query_item' = -5 is outside the document")
  T.raises(function() t:show {tokens = {1, "x"}, positions = {}} end, "tokens[2]")
  T.raises(function() t:show {tokens = {1}, colour = 1} end, "'colour' is not one of tokens")
  T.raises(function() mech.task.show {tokens = {1}} end,
    "bad argument #1 to 'mech.task.show' (a document with a 'task' field expected, got its 'task' nil)")
  T.raises(function() t.show(1, d) end, "calling 'task:show' on bad self (a mech.Task expected, got 1)")
  local ar = mech.task.preset("ar_32")
  T.truthy(ar:show(ar:sample(1)):find("next_key", 1, true))
end)

T.test("dataset sizes default to the paper's", function()
  local t = mech.task.preset("ar_32")
  T.eq(#t:dataset({split = "test"}), 320)
  T.eq(#t:dataset(nil, {split = "dev"}), 320)
  T.eq(#t:dataset(), 100032)
end)

T.test("dataset statistics", function()
  local st = mech.task.preset("ar_32"):dataset(200, {split = "test"}):stats()
  T.eq(st.doc_len, 37)
  T.eq(st.documents, 200)
  T.near(st.query_key_dist, 18, 2.5)
end)

T.test("options are read once per key, even from a table whose __index answers differently each time", function()
  for _, ctor in ipairs { "ar", "atr", "mqar" } do
    local reads = {}
    mech.task[ctor](setmetatable({}, { __index = function(_, k) reads[k] = (reads[k] or 0) + 1 end }))
    T.truthy(reads.seed, ctor)
    for k, n in pairs(reads) do T.eq(n, 1, string.format("mech.task.%s read '%s' %d times", ctor, k, n)) end
  end
  local reads = {}
  local ds = mech.task.preset("ar_32"):dataset(2, setmetatable({}, { __index = function(_, k)
    reads[k] = (reads[k] or 0) + 1
    if k == "split" and reads[k] == 1 then return "test" end
  end }))
  T.eq({ ds:split(), reads.split, reads.seed }, { "test", 1, 1 })
end)

T.test("options: unknown keys name the nearest valid one; bad values name the option", function()
  T.raises(function() mech.task.atr {max_rhs_lne = 3} end, "did you mean 'max_rhs_len'")
  T.raises(function() mech.task.ar {numkv = 3} end, "did you mean 'num_kv'")
  T.raises(function() mech.task.atr {max_rhs_len = 1} end, "max_rhs_len must be in 2..")
  T.raises(function() mech.task.atr {head_position = "middle"} end, "'head_position':? expected one of 'right', 'left', got 'middle'")
  T.raises(function() mech.task.atr {sample_first = "x"} end, "sample_first")
  T.raises(function() mech.task.atr {num_terminals = "many"} end, "bad argument #1 to 'mech.task.atr' (option 'num_terminals': expected an integer, got 'many')")
  T.raises(function() mech.task.atr {parent = false} end, "query type")
  T.raises(function() mech.task.ar {query_type = "vlaue"} end, "'key', 'value', got 'vlaue'")
  T.raises(function() mech.task.ar {length = 33} end, "even")
  T.raises(function() mech.task.preset("pcfg_5_2") end, "did you mean 'pcfg_5_20'")
  T.raises(function() mech.task.preset("ar_32"):dataset(-1) end, "number of documents")
  T.raises(function() mech.task.preset("ar_32"):dataset(2, {split = "val"}) end, "'split'")
  T.raises(function() mech.task.preset("ar_32"):dataset(2, {sed = 1}) end, "did you mean 'seed'")
  T.raises(function() mech.task.preset("ar_32"):sample({}) end, "seed")
end)

T.test("custom configurations", function()
  local t = mech.task.atr {child = true, sibling = true, head_position = "left", max_rhs_len = 6, seed = 3}
  local d = t:sample(1)
  T.eq(d.positions.query_type, d.stats.yield_len + 3)
  T.eq(d.len, d.stats.yield_len + 6)
  T.eq(t:config().head_position, "left")
  T.eq(t:config().max_rhs_len, 6)
  local a = mech.task.ar {num_kv = 64, length = 8}
  T.eq(a:sample(1).len, 13)
  T.eq(a:vocab_size(), 68)
  T.eq(a:config().num_kv, 64)
end)

-- rng = "numpy": the original generator's documents, token for token (tests/fixtures/
-- atr_reference_seed1.jsonl: the first 64 documents of every split of five presets at seed 1,
-- as the original produced them; see tests/fixtures/README.md).
T.test("rng = numpy reproduces the original's documents and probing schema", function()
  local json = require "mech.json"
  local tasks, sets, count, splits = {}, {}, 0, {}
  for line in io.lines("tests/fixtures/atr_reference_seed1.jsonl") do
    local f = json.decode(line)
    local key = f.preset .. "/" .. f.split
    tasks[f.preset] = tasks[f.preset] or mech.task.preset(f.preset, f.seed, { rng = "numpy" })
    sets[key] = sets[key] or tasks[f.preset]:dataset(64, { split = f.split })
    splits[key] = true
    local d, k, what = sets[key]:doc(f.index), f.schema.keys, key .. " #" .. f.index
    T.eq(d.tokens, f.tokens, what .. " tokens")
    T.eq(d.type, f.schema.type, what .. " type")
    for _, name in ipairs { "bos", "query_item", "target_item", "query_item_orig", "target_item_orig", "divider" } do
      T.eq(d.positions[name], k[name][1], what .. " " .. name)
    end
    T.eq(d.positions.query_type, nil, what .. " query_type") -- the original writes [0]: no such token
    T.eq(d.positions.all_target_items_orig, k.all_target_items_orig, what .. " all_target_items_orig")
    -- the answer distribution (written for vocabularies under 100): normalised counts of the
    -- tokens at all targets
    local expect = f.schema.queries.query_item.target_distribution
    if type(expect) == "table" then
      local dist, targets = {}, d.positions.all_target_items_orig
      for i = 1, #expect do dist[i] = 0.0 end
      for _, p in ipairs(targets) do dist[d.tokens[p + 1] + 1] = dist[d.tokens[p + 1] + 1] + 1 end
      for i = 1, #dist do dist[i] = dist[i] / #targets end
      T.eq(dist, expect, what .. " target distribution")
    end
    T.eq(d.tokens[d.positions.target_item_orig + 1] - 3, f.schema.target_distributions.target_item_orig, what)
    T.eq(d.tokens[d.positions.query_item_orig + 1] - 3, f.schema.target_distributions.query_item_orig, what)
    count = count + 1
  end
  T.eq(count, 704)
  local n = 0
  for _ in pairs(splits) do n = n + 1 end
  T.eq(n, 11) -- train and test of five presets, and pcfg_tts's dev
end)

T.test("rng option: default, recorded, errors", function()
  T.eq(mech.task.preset("pcfg_5_20", 42):config().rng, "philox")
  local t = mech.task.preset("pcfg_5_20", 42, { rng = "numpy" })
  T.eq(t:config().rng, "numpy")
  T.eq(mech.task.atr { rng = "numpy", seed = 1 }:config().rng, "numpy")
  T.raises(function() mech.task.preset("pcfg_5_20", 42, { rng = "mt" }) end,
    "option 'rng':? expected one of 'philox', 'numpy', got 'mt'")
  T.raises(function() mech.task.preset("pcfg_5_20", 42, { rgn = "numpy" }) end, "rgn")
  T.raises(function() mech.task.preset("ar_32", 42, { rng = "numpy" }) end, "ATR presets only")
  T.raises(function() mech.task.preset("pcfg_5_20", -1, { rng = "numpy" }) end, "0..2^32%-1")
  -- the protocol's split sizes; the dataset seed does not change the documents
  T.eq(t:dataset(nil, { split = "test" }):size(), 320)
  T.raises(function() t:dataset(1025, { split = "test" }) end, "1024 documents")
  T.raises(function() t:dataset(8, { split = "dev" }) end, "no dev split")
  T.eq(t:dataset(2, { seed = 1 }):doc(1).tokens, t:dataset(2, { seed = 2 }):doc(1).tokens)
end)

T.test("rng = numpy at seed 42 is the paper's data (its published corpus statistics)", function()
  local t = mech.task.preset("pcfg_5_20", 42, { rng = "numpy" })
  local test = t:dataset(1024, { split = "test" }):stats()
  T.near(test.yield_len, 15.96, 0.005)
  T.eq({ test.yield_len_min, test.yield_len_max }, { 3, 100 })
  T.near(test.depth, 3.02, 0.005)
  T.near(test.qt_dist, 2.56, 0.005)
  T.near(test.eligible_queries, 8.02, 0.005)
  T.near(t:dataset():stats().doc_len, 19.98, 0.005) -- all 100,032 training documents
  local tts = mech.task.preset("pcfg_tts", 42, { rng = "numpy" })
  T.near(tts:dataset(1024, { split = "dev" }):stats().yield_len, 9.17, 0.005)
  T.near(tts:dataset(1024, { split = "test" }):stats().yield_len, 11.29, 0.005)
end)

T.test("constructors without an options table take every default", function()
  T.eq(mech.task.ar():config(), mech.task.ar({}):config())
  T.eq(mech.task.atr():spec(), mech.task.atr(nil):spec())
  T.eq(mech.task.mqar():config().vocab_size, 8192)
  T.eq(mech.task.ar { length = 8 }:config().min_length, 8)
end)

T.done()
