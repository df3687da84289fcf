-- Tasks from JSON-lines files (mech.task.from_jsonl), datasets written to them (ds:write_jsonl),
-- round trips, bad lines; text to token ids (task:to_tokens).
local T = require "check"
local ex = require "mech.task_examples"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)

local function write(name, text)
  local p = tmp .. "/" .. name
  local f = assert(io.open(p, "w"))
  f:write(text)
  f:close()
  return p
end

-- the same batches and named positions
local function same(a, b)
  T.eq(#a, #b)
  local ta, ya = a:batch(0, #a)
  local tb, yb = b:batch(0, #b)
  T.truthy(ta:equal(tb), "tokens")
  T.truthy(ya:equal(yb), "targets")
  T.truthy(a:positions(0, #a):equal(b:positions(0, #b)), "positions")
end

T.test("round trips: built-in AR and MQAR, a Lua task; the file keeps names, positions, splits", function()
  local ar = mech.task.ar { num_kv = 16, length = 6 }
  local ds = ar:dataset(20, { seed = 2, split = "test" })
  local p = tmp .. "/ar.jsonl"
  ds:write_jsonl(p)
  local ft = mech.task.from_jsonl(p)
  T.eq(ft:kind(), "jsonl")
  T.eq(ft:vocab_size(), ar:vocab_size())
  T.eq(ft:token_name(5), ar:token_name(5))
  T.eq({ ft:corrupt_range() }, { ar:corrupt_range() })
  same(ds, ft:dataset({ split = "test" }))
  same(ds, ft:dataset(20, { split = "test" }))
  T.raises(function() ft:dataset(21, { split = "test" }) end, "holds 20 documents of split test, asked for 21")
  T.raises(function() ft:dataset(1, { split = "train" }) end, "holds 0 documents of split train")
  -- MQAR: several readouts per document
  local mq = mech.task.mqar { vocab_size = 32, input_seq_len = 16, num_kv_pairs = 3 }:dataset(10, { seed = 1 })
  mq:write_jsonl(tmp .. "/mq.jsonl")
  same(mq, mech.task.from_jsonl(tmp .. "/mq.jsonl"):dataset())
  -- a Lua task with holdout: each split's documents back
  local t = ex.modular_addition { p = 7 }
  for _, split in ipairs { "train", "test" } do
    local d = t:dataset(30, { seed = 5, split = split })
    d:write_jsonl(tmp .. "/ma.jsonl")
    local back = mech.task.from_jsonl(tmp .. "/ma.jsonl", { holdout = 0.2 })
    same(d, back:dataset({ split = split }))
    T.eq(back:to_str_tokens(back:dataset({ split = split }):batch(0, 1))[1], t:to_str_tokens(d:batch(0, 1))[1])
  end
  -- the record rebuilds it from the file
  local spec = ft:spec()
  T.eq(spec.kind, "jsonl")
  T.eq(spec.path, p)
  same(ds, mech.task.from_spec(spec):dataset({ split = "test" }))
end)

T.test("hand-written files: names or ids, splits, targets or readouts, vocabulary given or seen", function()
  local p = write("names.jsonl", table.concat({
    '{"tokens": ["<bos>", "a", "b", "=", "b"], "targets": [4], "positions": {"query_item_orig": 1, "divider": 3}}',
    '',
    '{"tokens": ["<bos>", "c", "a", "=", "c"], "readouts": [3], "answers": ["c"], "split": "test"}',
  }, "\n"))
  local t = mech.task.from_jsonl(p)
  T.eq(t:vocab_size(), 5) -- <bos> a b = c, in order of appearance
  T.eq(t:token_name(4), "c")
  T.eq(t:config().positions, { "query_item_orig", "divider" })
  local tr, te = t:dataset(), t:dataset({ split = "test" })
  T.eq(#tr, 1) -- the first line has no split: every split; the second is test only
  T.eq(#te, 2)
  local _, y = te:batch(1, 1)
  T.eq(y:get(0, 3), 4)
  T.eq(tr:doc(0).positions.divider, 3)
  -- long names survive a round trip (C's token_name cuts them for display only)
  local long = string.rep("x", 40)
  local lt = mech.task.new { name = "long", vocab = { "<pad>", long, "y" },
    sample = function() return { tokens = { long, "y" }, targets = { 1 } } end }
  lt:dataset(2):write_jsonl(tmp .. "/long.jsonl")
  local lb = mech.task.from_jsonl(tmp .. "/long.jsonl")
  T.eq(lb:to_tokens(long .. " y"):get(0, 0), 1)
  local q = write("ids.jsonl", '{"tokens": [1, 2, 3], "targets": [2]}\n{"tokens": [1, 6], "targets": [1]}\n')
  T.eq(mech.task.from_jsonl(q):vocab_size(), 7)
  T.eq(mech.task.from_jsonl(q, { vocab = 10, name = "ids" }):vocab_size(), 10)
  T.eq(mech.task.from_jsonl(q, { name = "ids" }):name(), "ids")
end)

T.test("a bad line is an error with its line number", function()
  local function bad(text, pattern, opts)
    local p = write("bad.jsonl", text)
    T.raises(function() mech.task.from_jsonl(p, opts) end, pattern)
  end
  bad('{"tokens": [1, 2], "targets": [1]}\n{"tokens": [1, 2], "targets": [1]\n', "bad.jsonl:2: mech.json_decode: unterminated object")
  bad('{"tokens": [1, 2], "targets": [1]}\n\n[1, 2]\n', "bad.jsonl:3: expected a JSON object")
  bad('{"tokens": [1, 2], "targets": [1]}\n{"tokens": [1, 2], "targets": [5]}\n', "bad.jsonl:2: targets[1] = 5")
  bad('{"tokens": [1, 2], "targets": [1]}\n{"tokens": [1, 9], "targets": [1]}\n', "bad.jsonl:2: token 9 at position 1",
    { vocab = 4 })
  bad('{"tokens": ["a", "b"], "targets": [1]}\n{"tokens": ["a", "z"], "targets": [1]}\n',
    "bad.jsonl:2: tokens[2] is 'z', a token the vocabulary does not have", { vocab = { "a", "b" } })
  bad('{"tokens": [1, 2], "targets": [1], "split": "val"}\n', "bad.jsonl:1: field 'split' expected")
  bad('{"tokens": [1, 2]}\n', "bad.jsonl:1: document has no target")
  bad('{"tokens": [1, "a"], "targets": [1]}\n', "mixes token ids and token names")
  bad('\n', "holds no document")
  T.raises(function() mech.task.from_jsonl(tmp .. "/missing.jsonl") end, "cannot read")
  T.raises(function() mech.task.from_jsonl(3) end, "argument 1 expected a file path")
  T.raises(function() mech.task.from_jsonl(tmp .. "/bad.jsonl", { vocb = 3 }) end, "did you mean 'vocab'")
  T.raises(function() mech.task.ar{}:dataset(2):write_jsonl(5) end, "argument 2 expected a file path")
end)

T.test("write_jsonl is atomic: a failed write leaves the old file", function()
  local p = write("keep.jsonl", "old\n")
  local ds = mech.task.ar { num_kv = 16, length = 4 }:dataset(3)
  T.raises(function() ds:write_jsonl(tmp .. "/no/such/dir/x.jsonl") end, "")
  ds:write_jsonl(p)
  T.truthy(mech.sys.read_file(p):find('"vocab"', 1, true))
end)

T.test("task:to_tokens: text or a list of texts to a padded int32 batch with the task's vocabulary", function()
  local ar = mech.task.ar { num_kv = 16, length = 4 }
  local t = ar:to_tokens("<bos> k3 v7 k1 v0 <eos> k3")
  T.eq(t:shape(), { 1, 7 })
  T.eq(t:get(0, 1), 3 + 3)
  T.eq(t:get(0, 2), 3 + 8 + 7)
  T.eq(ar:to_str_tokens(t)[1], { "<bos>", "k3", "v7", "k1", "v0", "<eos>", "k3" })
  local b = ar:to_tokens { "<bos> k1", "<bos> k2 v2 <eos>" }
  T.eq(b:shape(), { 2, 4 })
  T.eq(b:get(0, 3), mech.task.PAD)
  T.eq(ar:to_tokens { { "k1", "v1" } }:get(0, 1), 3 + 8 + 1)
  T.raises(function() ar:to_tokens("<bos> k3 v99") end, "unknown token 'v99' (row 1, token 3)")
  T.raises(function() ar:to_tokens {} end, "expected a string of tokens or a non-empty list")
  T.raises(function() ar:to_tokens("   ") end, "holds no token")
  local mq = mech.task.mqar { vocab_size = 16, input_seq_len = 8, num_kv_pairs = 2 }
  T.eq(mq:to_tokens("k1 v0 _"):get(0, 1), 8)
  local ids = mech.task.new { name = "ids", vocab = 5, sample = function() return { tokens = { 1, 2 }, targets = { 1 } } end }
  T.eq(ids:to_tokens("4 0"):get(0, 0), 4)
  T.raises(function() ids:to_tokens("5") end, "unknown token '5'")
  local names = ex.copy {}
  T.eq(names:to_tokens("<bos> s0 s1 = s0 s1"):get(0, 5), 4)
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
