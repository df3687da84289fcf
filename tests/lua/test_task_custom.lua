-- Tasks written in Lua (mech.task.new, mech.task.load), their datasets, batches, records and bad
-- input; training, the interchange evaluation and patching on them; a sweep over one.
local T = require "check"
local json = require "mech.json"
local ic = require "mech.interchange"
local train = require "mech.train"
local ex = require "mech.task_examples"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

-- a task of the test's own: <bos> x y = (x + y) mod 5, answers as ids
local function sum_task(over)
  local def = {
    name = "sum5", vocab = 9, positions = { "bos", "query_item_orig", "target_item_orig", "divider" },
    corrupt = { 4, 8 },
    sample = function(gen)
      local x, y = gen:below(5), gen:below(5)
      return { tokens = { 1, 4 + x, 4 + y, 2, 4 + (x + y) % 5 }, targets = { 4 },
        positions = { bos = 0, query_item_orig = 1, target_item_orig = 2, divider = 3 } }
    end,
  }
  for k, v in pairs(over or {}) do def[k] = v end
  return mech.task.new(def)
end

T.test("a Lua task's dataset: documents, batches, readouts, determinism per seed, splits", function()
  local t = sum_task()
  T.eq(t:kind(), "lua")
  T.eq(t:vocab_size(), 9)
  T.eq(t:name(), "sum5")
  local ds = t:dataset(50, { seed = 3 })
  T.eq(#ds, 50)
  local tokens, targets, pos = ds:batch(0, 50)
  T.eq(tokens:shape(), { 50, 5 })
  for b = 0, 49 do
    local x, y = tokens:get(b, 1) - 4, tokens:get(b, 2) - 4
    T.eq(targets:get(b, 3), 4 + (x + y) % 5) -- read at the divider, one before the answer
    T.eq(targets:get(b, 4), -100)
    T.eq(pos.divider[b + 1], 3)
    T.eq(pos.query_item[b + 1], -1) -- not declared: absent
  end
  local d = ds:doc(7)
  T.eq(d.readouts, { 3 })
  T.eq(d.answers[1], d.tokens[5])
  T.eq(t:to_str_tokens({ 0, 8 }), { "0", "8" })
  T.truthy(ds:show(0):find("readouts", 1, true))
  -- same seed, same documents; another seed or split, other ones; the sample function's generator
  -- is the split's own stream (task:sample(seed) is document 0 of that dataset)
  T.truthy(t:dataset(50, { seed = 3 }):batch(0, 50):equal(tokens))
  T.falsy(t:dataset(50, { seed = 4 }):batch(0, 50):equal(tokens))
  T.falsy(t:dataset(50, { seed = 3, split = "test" }):batch(0, 50):equal(tokens))
  T.eq(t:sample(3).tokens, ds:doc(0).tokens)
  T.eq(t:sample(3, "test").tokens, t:dataset(1, { seed = 3, split = "test" }):doc(0).tokens)
  T.eq(#t:dataset({ split = "test" }), mech.task.EVAL_DOCS)
  T.eq(ds:task():spec().kind, "lua") -- the dataset's task keeps its definition
  T.eq(ds:doc(0).task:name(), "sum5")
  local draws = {}
  for i = 1, 8 do draws[i] = table.concat(t:sample().tokens, ",") end
  T.truthy(draws[1] ~= draws[2] or draws[2] ~= draws[3] or draws[3] ~= draws[4], "task:sample() draws on")
  -- named tokens in documents, a generator passed to sample
  local named = mech.task.new { name = "named", vocab = { "<pad>", "a", "b" },
    sample = function(gen) return { tokens = { "a", gen:below(2) == 0 and "a" or "b" }, targets = { 1 } } end }
  local g = mech.Generator(5)
  T.truthy(named:sample(g).tokens[1] == 1)
  T.eq(named:to_str_tokens(named:dataset(4):batch(0, 4))[1][1], "a")
end)

T.test("holdout: train and test never share a document; dev and test are evaluated", function()
  local t = ex.modular_addition { p = 11, holdout = 0.3 }
  T.truthy(t:has_split())
  local seen = {}
  local tr = t:dataset(2000, { seed = 1 })
  local tok = tr:batch(0, 2000)
  for b = 0, 1999 do seen[tok:get(b, 1) * 100 + tok:get(b, 3)] = true end
  local n_train = 0
  for _ in pairs(seen) do n_train = n_train + 1 end
  T.truthy(n_train > 60 and n_train < 110, "most pairs are in train: " .. n_train)
  for _, split in ipairs { "test", "dev" } do
    local te = t:dataset(300, { seed = 1, split = split }):batch(0, 300)
    for b = 0, 299 do T.falsy(seen[te:get(b, 1) * 100 + te:get(b, 3)], "a test pair in train") end
  end
  T.falsy(sum_task():has_split())
end)

T.test("bad sample functions and documents are errors naming the document, before any training", function()
  local function bad(doc_or_fn, pattern)
    local sample = type(doc_or_fn) == "function" and doc_or_fn or function() return doc_or_fn end
    local t = mech.task.new { name = "bad", vocab = 6, positions = { "query_item" }, sample = sample }
    T.raises(function() t:dataset(3) end, pattern)
    -- train.run refuses before writing anything into its run directory
    local out = tmp .. "/bad_run"
    T.raises(function()
      train.run { model = { arch = "attention", d_model = 8, n_layers = 1 }, task = t, train_docs = 8, eval_docs = 4,
        batch_size = 4, steps = 2, quiet = true, out = out }
    end, pattern)
    for _, f in ipairs { "manifest.json", "metrics.csv", "checkpoint.safetensors" } do
      T.falsy(mech.sys.exists(out .. "/" .. f), f .. " written")
    end
  end
  bad(function() error("no luck") end, "task 'bad', document 0 of split train: its sample function failed: ")
  bad(function() error("no luck") end, "no luck")
  bad({ tokens = { 1, 2.5 }, targets = { 1 } }, "tokens[2] expected an integer token id, got 2.5")
  bad({ tokens = { 1, 7 }, targets = { 1 } }, "token 7 at position 1 is outside the vocabulary 0..5")
  bad({ tokens = { 1, -1 }, targets = { 1 } }, "token -1 at position 1 is outside the vocabulary 0..5")
  bad({ tokens = { 1, 2 }, targets = { 1 }, positions = { query_item = 2 } }, "position 'query_item' = 2 is outside the document (0..1)")
  bad({ tokens = { 1, 2 }, targets = { 1 }, positions = { divider = 0 } }, "position 'divider' is not one the task declares")
  bad({ tokens = { 1, 2 }, targets = { 1 }, positions = { middle = 0 } }, "'middle' is not a position name")
  bad({ tokens = { 1, 2 }, targets = { 2 } }, "targets[1] = 2 is not a position of the document that can be predicted")
  bad({ tokens = { 1, 2 }, targets = { 0 } }, "targets[1] = 0 is not a position")
  bad({ tokens = { 1, 2 }, readouts = { 5 }, answers = { 1 } }, "readout 1 at position 5 is outside the document")
  bad({ tokens = { 1, 2 }, readouts = { 0 }, answers = { 9 } }, "answer 1 (9) is outside the vocabulary")
  bad({ tokens = { 1, 2 } }, "document has no target")
  bad({ tokens = { 1, 2 }, target = { 1 } }, "document field 'target' is not one of tokens")
  bad({ tokens = "1 2", targets = { 1 } }, "document field 'tokens' expected a list, got string")
  bad({ tokens = { 1, "x" }, targets = { 1 } }, "tokens[2] expected an integer token id, got string")
  bad(42, "expected a document table {tokens=, targets=, positions=}, got number")
  bad(function() end, "expected a document table {tokens=, targets=, positions=}, got nil")
  -- the definition itself
  T.raises(function() mech.task.new { name = "x", vocab = 4 } end, "option 'sample': expected a function")
  T.raises(function() mech.task.new { name = "x", vocab = 0, sample = print } end, "option 'vocab': expected")
  T.raises(function() mech.task.new { name = "x", vocab = { "a", "a" }, sample = print } end, "names 'a' twice")
  -- a position name of the task's own must be an identifier (free names: test_task_positions.lua)
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = print, positions = { "the key" } } end,
    "option 'positions' entry 1 is 'the key'")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = print, corrupt = { 1, 9 } } end, "option 'corrupt' hi")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = print, holdout = 1 } end, "option 'holdout'")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = print, smaple = 1 } end, "did you mean 'sample'")
  T.raises(function() mech.task.new { name = "a b", vocab = 4, sample = print } end, "option 'name'")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = print, options = { f = print } } end,
    "must be plain data")
  T.raises(function() mech.task.new(5) end, "argument 1 expected a table")
end)

-- sum5 in the batched form: <bos> x y = (x + y) mod 5 for a whole batch with tensor ops
local function sum_batch_task()
  return mech.task.new {
    name = "sum5b", vocab = 9, positions = { "bos", "query_item_orig", "target_item_orig", "divider" },
    corrupt = { 4, 8 },
    sample_batch = function(gen, split, n)
      local g, i32 = { generator = gen }, { dtype = "int32" }
      local x, y = mech.randint(0, 5, n, 1, g), mech.randint(0, 5, n, 1, g)
      local tokens = mech.cat({ mech.full({ n, 1 }, 1, i32), x + 4, y + 4, mech.full({ n, 1 }, 2, i32),
        (x + y):sub((x + y):ge(5) * 5) + 4 }, 1)
      return { tokens = tokens, targets = { 4 },
        positions = { bos = 0, query_item_orig = 1, target_item_orig = mech.full({ n }, 2, i32), divider = 3 } }
    end,
  }
end

T.test("the batched form: sample_batch's tensors give the same kind of dataset, deterministic per seed", function()
  local t = sum_batch_task()
  T.eq(t:kind(), "lua")
  local ds = t:dataset(300, { seed = 3 })
  T.eq(#ds, 300)
  local tokens, targets, pos = ds:batch(0, 300)
  T.eq(tokens:shape(), { 300, 5 })
  local seen = {}
  for b = 0, 299 do
    local x, y = tokens:get(b, 1) - 4, tokens:get(b, 2) - 4
    seen[x * 5 + y] = true
    T.eq(targets:get(b, 3), 4 + (x + y) % 5)
    T.eq(pos.target_item_orig[b + 1], 2)
    T.eq(pos.query_item[b + 1], -1)
  end
  local n_pairs = 0
  for _ in pairs(seen) do n_pairs = n_pairs + 1 end
  T.eq(n_pairs, 25, "every (x, y) drawn")
  T.eq(ds:doc(5).readouts, { 3 })
  T.truthy(t:dataset(300, { seed = 3 }):batch(0, 300):equal(tokens))
  T.falsy(t:dataset(300, { seed = 4 }):batch(0, 300):equal(tokens))
  T.falsy(t:dataset(300, { seed = 3, split = "test" }):batch(0, 300):equal(tokens))
  T.eq(t:sample(3).tokens, t:dataset(1, { seed = 3 }):doc(0).tokens, "task:sample(seed): document 0 of a 1-document set")
  -- a batch draws column by column, so a smaller set is not a prefix of a larger one (docs/tasks.md)
  T.eq(t:dataset(300, { seed = 3 }):doc(299).tokens, ds:doc(299).tokens)
  -- a batch may hold fewer rows than asked (a rejection sampler drops some): the builder asks again
  local calls, asked = 0, {}
  local few = mech.task.new { name = "few", vocab = 9, sample_batch = function(gen, split, n)
    calls = calls + 1
    asked[calls] = n
    local m = math.min(n, 7)
    return { tokens = mech.randint(4, 9, m, 5, { generator = gen }), targets = { 4 } }
  end }
  T.eq(#few:dataset(20), 20)
  T.eq(asked, { 20, 13, 6 })
  -- targets, readouts and answers as per-document tensors (-1: none in that column)
  local multi = mech.task.new { name = "multi", vocab = 6, positions = { "query_item" }, sample_batch = function(gen, split, n)
    local tokens = mech.randint(0, 6, n, 4, { generator = gen })
    local tg = mech.full({ n, 2 }, -1, { dtype = "int32" })
    tg[{ ":", 0 }] = 3
    tg[{ 0, 1 }] = 2
    return { tokens = tokens, targets = tg, readouts = mech.full({ n, 1 }, 0, { dtype = "int32" }),
      answers = mech.full({ n, 1 }, 5, { dtype = "int32" }), positions = { query_item = mech.arange(n):minimum(3) }, type = "VALUE" }
  end }
  local md = multi:dataset(6)
  T.eq(md:doc(0).readouts, { 0, 1, 2 })
  T.eq(md:doc(0).answers, { 5, md:doc(0).tokens[3], md:doc(0).tokens[4] })
  T.eq(md:doc(1).readouts, { 0, 2 })
  T.eq(md:doc(1).answers, { 5, md:doc(1).tokens[4] })
  T.eq(md:doc(0).type, "VALUE")
  T.eq(md:doc(2).positions.query_item, 2)
  T.eq(md:doc(5).positions.query_item, 3)
end)

T.test("the batched form with a holdout, and associative_recall's two forms", function()
  local t = sum_batch_task()
  local held = mech.task.new { name = "held", vocab = 9, holdout = 0.4, sample_batch = debug.getuservalue(t, 1).sample_batch,
    positions = { "bos", "query_item_orig", "target_item_orig", "divider" } }
  T.truthy(held:has_split())
  local tr = held:dataset(500, { seed = 1 }):batch(0, 500)
  local seen = {}
  for b = 0, 499 do seen[tr:get(b, 1) * 100 + tr:get(b, 2)] = true end
  local te = held:dataset(200, { seed = 1, split = "test" }):batch(0, 200)
  for b = 0, 199 do T.falsy(seen[te:get(b, 1) * 100 + te:get(b, 2)], "a test pair in train") end
  for _, batched in ipairs { true, false } do
    local ar = mech.task.load("mech.task_examples", { n_keys = 8, n_pairs = 3, batched = batched }, 1, "associative_recall")
    local ds = ar:dataset(200, { seed = 2 })
    for i = 0, 199 do
      local d = ds:doc(i)
      local keys, values = {}, {}
      for j = 1, 3 do
        T.falsy(keys[d.tokens[2 * j]], "a repeated key")
        T.falsy(values[d.tokens[2 * j + 1]], "a repeated value")
        keys[d.tokens[2 * j]], values[d.tokens[2 * j + 1]] = true, true
      end
      local q = d.positions.query_item_orig
      T.eq(d.tokens[d.positions.query_item + 1], d.tokens[q + 1])
      T.eq(d.answers[1], d.tokens[q + 2])
      T.eq(d.readouts[1], 8)
    end
  end
  T.raises(function() mech.task.load("mech.task_examples", { n_keys = 4, n_pairs = 4 }, 1, "associative_recall") end,
    "use batched = false")
end)

T.test("bad sample_batch functions and batches are errors naming the document, before any training", function()
  local function bad(batch_or_fn, pattern)
    local sb = type(batch_or_fn) == "function" and batch_or_fn or function() return batch_or_fn end
    local t = mech.task.new { name = "badb", vocab = 6, positions = { "query_item" }, sample_batch = sb }
    T.raises(function() t:dataset(3) end, pattern)
    local out = tmp .. "/bad_batch_run"
    T.raises(function()
      train.run { model = { arch = "attention", d_model = 8, n_layers = 1 }, task = t, train_docs = 8, eval_docs = 4,
        batch_size = 4, steps = 2, quiet = true, out = out }
    end, pattern)
    for _, f in ipairs { "manifest.json", "metrics.csv", "checkpoint.safetensors" } do
      T.falsy(mech.sys.exists(out .. "/" .. f), f .. " written")
    end
  end
  local function i32(v) return mech.tensor(v, { dtype = "int32" }) end
  local ok3 = i32 { { 1, 2 }, { 1, 3 }, { 1, 4 } }
  bad(function() error("no luck") end, "task 'badb': its sample_batch function failed (")
  bad(function() error("no luck") end, "documents asked, 0 kept before): ")
  bad({ tokens = i32 { { 1, 2 }, { 1, 7 }, { 1, 2 } }, targets = { 1 } },
    "task 'badb', document 1 of split train (row 1 of its batch): the sample_batch function's document is wrong: "
    .. "token 7 at position 1 is outside the vocabulary 0..5")
  bad({ tokens = i32 { { 1, 2 }, { 1, 2 }, { -1, 2 } }, targets = { 1 } }, "document 2 of split train (row 2")
  bad({ tokens = ok3, targets = i32 { { 1 }, { 2 }, { 1 } } },
    "document 1 of split train (row 1 of its batch): the sample_batch function's document is wrong: targets column 0 "
    .. "(0-based) = 2 is not a position of the document that can be predicted")
  bad({ tokens = ok3, targets = { 1 }, positions = { query_item = i32 { 0, 1, 2 } } },
    "document 2 of split train (row 2 of its batch): the sample_batch function's document is wrong: position "
    .. "'query_item' = 2 is outside the document (0..1)")
  bad({ tokens = ok3, targets = { 1 }, positions = { divider = 0 } }, "position 'divider' is not one the task declares")
  bad({ tokens = ok3, readouts = i32 { { 0 }, { 0 }, { 0 } }, answers = i32 { { 1 }, { 9 }, { 1 } } },
    "document 1 of split train (row 1 of its batch): the sample_batch function's document is wrong: answer 1 (9)")
  bad({ tokens = ok3 }, "document 0 of split train (row 0 of its batch): the sample_batch function's document is "
    .. "wrong: document has no target")
  bad({ tokens = ok3:float(), targets = { 1 } }, "the batch of documents 0.. of split train is wrong: sample_batch's "
    .. "field 'tokens' expected an int32 tensor (n, L) with 1 <= n <= ")
  bad({ tokens = ok3:float(), targets = { 1 } }, " (the documents asked for) and 1 <= L <= 2^24, got a float32 tensor of "
    .. "shape [3,2]")
  local t4 = mech.task.new { name = "four", vocab = 6, sample_batch = function()
    return { tokens = i32 { { 1, 2 }, { 1, 2 }, { 1, 2 }, { 1, 2 } }, targets = { 1 } }
  end }
  T.raises(function() t4:dataset(3) end, "1 <= n <= 3 (the documents asked for)")
  T.eq(#t4:dataset(8), 8)
  bad({ tokens = { { 1, 2 } }, targets = { 1 } }, "field 'tokens' expected an int32 tensor (n, L)")
  bad({ tokens = ok3, targets = i32 { { 1 }, { 1 } } }, "sample_batch's field 'targets' expected an int32 tensor (n, k) "
    .. "or a list of integers that every document shares, got an int32 tensor of shape [2,1]")
  bad({ tokens = ok3, targets = { 1.5 } }, "sample_batch's field 'targets' entry 1 expected an integer, got 1.5")
  bad({ tokens = ok3, targets = { 1 }, positions = { query_item = i32 { 0, 1 } } },
    "field 'positions.query_item' expected an int32 tensor (n) or an integer that every document shares")
  bad({ tokens = ok3, targets = { 1 }, positions = { middle = 0 } }, "positions: 'middle' is not a position name")
  bad({ tokens = ok3, target = { 1 } }, "sample_batch's field 'target' is not one of tokens")
  bad({ tokens = ok3, readouts = i32 { { 0 }, { 0 }, { 0 } } }, "fields 'readouts' and 'answers' expected the same")
  bad({ tokens = ok3, targets = { 1 }, type = "KEYS" }, "sample_batch's field 'type' expected KEY, VALUE")
  bad(42, "sample_batch expected to return a table {tokens=, targets=, positions=}, got number")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample_batch = 5 } end,
    "option 'sample_batch': expected a function(gen, split, n)")
  T.raises(function() mech.task.new { name = "x", vocab = 4, sample = 5, sample_batch = print } end,
    "option 'sample': expected a function")
end)

T.test("training, the interchange evaluation and patching on a Lua task", function()
  local t = ex.copy { n_symbols = 6, min_len = 2, max_len = 4 }
  local r = train.run { model = { arch = "attention", d_model = 32, n_layers = 2, state_mixer = "mlp" }, task = t,
    train_docs = 1024, eval_docs = 64, batch_size = 32, steps = 120, quiet = true, seed = 1, lr = 3e-3 }
  T.truthy(r.final.accuracy > 0.5, "the copy task is learnt a little: " .. r.final.accuracy)
  local test = t:dataset(32, { split = "test" })
  local res = ic.evaluate(r.model, test, { layers = { 0, 1 }, components = { "block_input" } })
  -- label type query_item_orig only (the task declares no target_item_orig), its 4 positions, 2 layers
  T.eq(res.n_combos, 8)
  local n = 0
  for i = 0, #test - 1 do n = n + #test:doc(i).readouts end
  T.eq(res.corrupt_token:shape(), { 8, n }) -- one example per copied symbol
  T.truthy(res.by_name["0.KEY.query_item_orig.query_item_orig.block_input.attrib"])
  ic.write_csv(res, tmp .. "/ic.csv", 120, "test")
  T.truthy(mech.sys.read_file(tmp .. "/ic.csv"):find("120,test,1.KEY.query_item_orig.divider.block_input.", 1, true))
  local clean, corrupted = ic.corrupt(test, 0, 8)
  local rows, targets = ic.readout(test, 0, 8)
  T.eq(rows:get(0), test:doc(0).readouts[1])
  local map = mech.interp.patching_map(r.model, clean, corrupted, { rows = rows, targets = targets, layers = { 0, 1 } })
  T.truthy(tostring(map):find("PatchingMap", 1, true))
end)

T.test("records: a module's task is rebuilt from checkpoints; without its module, a clear error", function()
  local t = mech.task.load("mech.task_examples", { n_symbols = 5 }, 7, "copy")
  local spec = t:spec()
  T.eq(spec, { kind = "lua", name = "copy", seed = 7, module = "mech.task_examples", options = { n_symbols = 5 } })
  local back = mech.task.from_spec(json.decode(json.encode(spec)))
  T.truthy(back:dataset(20, { seed = 2 }):batch(0, 20):equal(t:dataset(20, { seed = 2 }):batch(0, 20)))
  local out = tmp .. "/lua_run"
  train.run { model = { arch = "attention", d_model = 8, n_layers = 1 }, task = { module = "mech.task_examples",
    name = "copy", options = { n_symbols = 5 } }, train_docs = 16, eval_docs = 8, batch_size = 8, steps = 2, quiet = true,
    out = out }
  local man = json.decode(mech.sys.read_file(out .. "/manifest.json"))
  T.eq(man.task.module, "mech.task_examples")
  T.eq(man.config.task.options.n_symbols, 5)
  local _, _, meta = mech.load(out .. "/checkpoint.safetensors")
  T.eq(meta.task:spec().options, { n_symbols = 5 })
  T.eq(mech.task.from_checkpoint(out .. "/checkpoint.safetensors"):name(), "copy")
  -- a task without a module, and one whose module is gone
  local anon = sum_task()
  T.raises(function() mech.task.from_spec(anon:spec()) end, "was made without a module")
  local gone = spec
  gone.module = "no_such_task_module"
  T.raises(function() mech.task.from_spec(gone) end, "names module 'no_such_task_module', which this process has not loaded")
  T.raises(function() mech.task.from_spec(gone, { modules = { "no_such_task_module" } }) end,
    "cannot load module 'no_such_task_module' of the Lua task 'copy'")
  local out2 = tmp .. "/anon_run"
  train.run { model = { arch = "attention", d_model = 8, n_layers = 1 }, task = anon, train_docs = 16, eval_docs = 8,
    batch_size = 8, steps = 1, quiet = true, out = out2 }
  local _, _, meta2 = mech.load(out2 .. "/checkpoint.safetensors")
  T.eq(meta2.task, nil)
  T.truthy(meta2.task_error:find("'sum5' was made without a module", 1, true), meta2.task_error)
  T.raises(function() mech.task.from_checkpoint(out2 .. "/checkpoint.safetensors") end, "made without a module")
  -- a checkpoint whose task module has gone: mech.load says so, experiments/interchange.lua stops with it
  local mod_dir = tmp .. "/mods"
  mech.sys.mkdir(mod_dir)
  local f = assert(io.open(mod_dir .. "/gone_task_mod.lua", "w"))
  f:write('return function(o) return require("mech.task_examples").copy(o) end\n')
  f:close()
  local saved_path = package.path
  package.path = mod_dir .. "/?.lua;" .. package.path
  local out3 = tmp .. "/gone_run"
  train.run { model = { arch = "attention", d_model = 8, n_layers = 2 }, task = { module = "gone_task_mod",
    options = { n_symbols = 3 } }, train_docs = 16, eval_docs = 8, batch_size = 8, steps = 1, quiet = true, out = out3 }
  package.path = saved_path
  package.loaded.gone_task_mod = nil
  os.remove(mod_dir .. "/gone_task_mod.lua")
  local ckpt = out3 .. "/checkpoint.safetensors"
  local _, _, meta3 = mech.load(ckpt, { modules = { "gone_task_mod" } })
  T.eq(meta3.task, nil)
  T.truthy(meta3.task_error:find("cannot load module 'gone_task_mod' of the Lua task 'copy'", 1, true), meta3.task_error)
  T.raises(function() mech.task.from_checkpoint(ckpt, { modules = { "gone_task_mod" } }) end, "cannot load module 'gone_task_mod'")
  T.raises(function() mech.task.from_checkpoint(ckpt) end, "names module 'gone_task_mod', which this process has not loaded")
  local p = io.popen(string.format("%q experiments/interchange.lua %q --allow-module gone_task_mod 2>&1", arg[-1], ckpt))
  local text = p:read("a")
  T.falsy(p:close(), text)
  T.truthy(text:find("cannot load module 'gone_task_mod'", 1, true), text)
  T.raises(function() mech.task.load("mech.task_examples", {}, nil, "nope") end, "'nope' among them")
  T.raises(function() mech.task.load(3) end, "argument 1 expected a module name")
end)

T.test("a sweep over a Lua task: recorded as data, ids stable between list and run, workers load it", function()
  local sweep = require "mech.sweep"
  local def = {
    name = "luatask",
    base = { model = { n_layers = 1, d_model = 8, arch = "attention" }, train_docs = 32, eval_docs = 8,
      batch_size = 8, steps = 4, eval_every = 4, seed = 1 },
    grid = { task = { { module = "mech.task_examples", name = "copy", options = { n_symbols = 4 } },
      { module = "mech.task_examples", name = "modular_addition", options = { p = 5 } } } },
  }
  local a, b = sweep.load(def), sweep.load(def)
  T.eq(#a.runs, 2)
  T.eq(a.runs[1].id, b.runs[1].id)
  T.truthy(a.runs[1].id:match("^copy%-"), a.runs[1].id)
  -- a task object in a sweep file is recorded as its record; one without a module is refused
  local def2 = { name = "luatask2", base = def.base, grid = { task = { mech.task.load("mech.task_examples", { p = 5 }, 42,
    "modular_addition") } } }
  local c = sweep.load(def2)
  T.eq(c.runs[1].config.task.module, "mech.task_examples")
  T.truthy(c.runs[1].id:match("^modular_addition%-"), c.runs[1].id)
  def2.grid.task = { sum_task() }
  T.raises(function() sweep.load(def2) end, "task 'sum5' was written in Lua without a module")
  local dir = tmp .. "/sweep"
  local res = sweep.run(def, { dir = dir, jobs = 1 })
  local sj = json.decode(mech.sys.read_file(dir .. "/sweep.json"))
  local text = json.encode(sj)
  T.falsy(text:find("function:", 1, true), "no functions in sweep.json")
  T.truthy(text:find('"module":"mech.task_examples"', 1, true))
  local st = sweep.status(dir)
  local ids = {}
  for _, r in ipairs(st.runs) do
    T.eq(r.state, "done", r.id)
    ids[#ids + 1] = r.id
  end
  table.sort(ids)
  local want = { a.runs[1].id, a.runs[2].id }
  table.sort(want)
  T.eq(ids, want)
  T.truthy(res)
  -- the aggregate names the task by its name
  local csv = mech.sys.read_file(dir .. "/results.csv") or ""
  T.truthy(csv:find(",done,copy,attention,", 1, true) and csv:find(",done,modular_addition,attention,", 1, true),
    csv:sub(1, 300))
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
