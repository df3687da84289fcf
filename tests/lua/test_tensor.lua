-- The tensor userdata from Lua: constructors, 0-based indexing and slicing, printing,
-- autograd verbs, generators, memory accounting and error messages.
local T = require "check"

T.test("constructors and shapes", function()
  local t = mech.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  T.eq(t:shape(), { 2, 3 })
  T.eq(t:dtype(), "float32")
  T.eq(mech.zeros(2, 3):shape(), { 2, 3 })
  T.eq(mech.zeros({ 4 }, { dtype = "int32" }):dtype(), "int32")
  T.eq(mech.full({ 2 }, 7):tolist(), { 7, 7 })
  T.eq(mech.arange(4):tolist(), { 0, 1, 2, 3 })
  T.eq(mech.arange(1, 2, 0.5):tolist(), { 1, 1.5 })
  T.eq(mech.tensor(3):dim(), 0)
  T.eq(mech.tensor(3):item(), 3)
  T.eq(#mech.zeros(5, 2), 5)
end)

T.test("0-based indexing, selection and slices", function()
  local t = mech.arange(12):reshape(3, 4)
  T.eq(t[0]:tolist(), { 0, 1, 2, 3 })
  T.eq(t[-1]:tolist(), { 8, 9, 10, 11 })
  T.eq(t[{ 1, 2 }], 6)
  T.eq(t[{ ":", 1 }]:tolist(), { 1, 5, 9 })
  T.eq(t[{ "1:", "::2" }]:tolist(), { { 4, 6 }, { 8, 10 } })
  T.eq(t[{ { 0, 2 }, { 1, 4, 2 } }]:tolist(), { { 1, 3 }, { 5, 7 } })
  T.eq(t:get(2, 3), 11)
  T.eq(t:narrow(1, 1, 2):tolist(), { { 1, 2 }, { 5, 6 }, { 9, 10 } })
  T.eq(t:transpose(0, 1):shape(), { 4, 3 })
  T.eq(t:transpose(0, 1)[{ 3, 2 }], 11)
end)

T.test("views share storage; writes go through", function()
  local t = mech.zeros(2, 3)
  local row = t[1]
  row[2] = 5
  T.eq(t:get(1, 2), 5)
  t[{ ":", 0 }] = 9
  T.eq(t:tolist(), { { 9, 0, 0 }, { 9, 0, 5 } })
  t[0] = mech.tensor { 1, 2, 3 }
  T.eq(t[0]:tolist(), { 1, 2, 3 })
  t:set(4, 0, 0)
  T.eq(t[{ 0, 0 }], 4)
end)

-- the data lines of a printed tensor (after the header line)
local function body(t) return (tostring(t):gsub("^[^\n]*\n", "")) end

T.test("printing shows every element up to the threshold, then summarises", function()
  T.eq(body(mech.arange(7)), "[0, 1, 2, 3, 4, 5, 6]")
  local s = tostring(mech.zeros(20, 30)) -- 600 elements: all of them
  T.truthy(s:find("tensor(shape=[20,30], dtype=float32)", 1, true), s)
  T.falsy(s:find("...", 1, true), "no ellipsis below 1000 elements")
  local lines = 0
  for _ in s:gmatch("\n") do lines = lines + 1 end
  T.truthy(lines >= 20, "one line per row at least: " .. lines)
  T.eq(body(mech.arange(2000)), "[   0,    1,    2, ..., 1997, 1998, 1999]")
  local big = tostring(mech.zeros(40, 30)) -- 1200 elements: 3 rows at each end
  T.truthy(big:find("...", 1, true), "ellipsis")
  local rows = 0
  for _ in big:gmatch("%[0%.") do rows = rows + 1 end
  T.eq(rows, 6, big)
  local x = mech.ones(2, { requires_grad = true })
  T.truthy(tostring(x * 2):find("grad_fn=", 1, true))
end)

T.test("one format per tensor, as PyTorch prints", function()
  T.eq(body(mech.arange(3):float()), "[0., 1., 2.]")
  T.eq(body(mech.tensor { -1.5, 2.25 }), "[-1.5000,  2.2500]")
  T.eq(body(mech.tensor { 1e-5, 1, 100 }), "[1.0000e-05, 1.0000e+00, 1.0000e+02]")
  T.eq(body(mech.tensor { 0 / 0, 1 / 0, -1 / 0, 2 }), "[ nan,  inf, -inf,   2.]")
  T.eq(body(mech.tensor { 1, 3e-5, 0.25 }), "[1.0000, 0.0000, 0.2500]", "probabilities stay fixed")
  T.eq(body(mech.tensor { 3e-3, 2e-5 }), "[3.0000e-03, 2.0000e-05]", "small values in [0, 1] are not probabilities")
  T.eq(body(mech.arange(6):reshape(2, 3)), "[[0, 1, 2],\n [3, 4, 5]]")
  T.eq(body(mech.arange(8):reshape(2, 2, 2)), "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]")
  T.eq(body(mech.tensor(3.5)), "3.5000")
  T.eq(body(mech.zeros(0)), "[]")
end)

T.test("set_printoptions and get_printoptions", function()
  local saved = mech.get_printoptions()
  T.eq(saved, { threshold = 1000, edgeitems = 3, precision = 4, linewidth = 80, sci_mode = "auto" })
  mech.set_printoptions { threshold = 5, edgeitems = 1 }
  T.eq(body(mech.arange(7)), "[0, ..., 6]")
  T.eq(body(mech.arange(4)), "[0, 1, 2, 3]", "at the threshold: everything")
  T.eq(mech.get_printoptions().precision, 4, "keys left out keep their value")
  mech.set_printoptions { precision = 2, threshold = math.huge }
  T.eq(body(mech.tensor { 1 / 3, 2 }), "[0.33, 2.00]")
  T.falsy(tostring(mech.zeros(50, 50)):find("...", 1, true), "math.huge: never summarised")
  mech.set_printoptions { linewidth = 20, precision = 4, threshold = 1000 }
  T.eq(body(mech.arange(8)), "[0, 1, 2, 3, 4, 5,\n 6, 7]")
  mech.set_printoptions { profile = "default" }
  T.eq(mech.get_printoptions(), saved)
  mech.set_printoptions { profile = "full" }
  T.eq(mech.get_printoptions().threshold, math.huge)
  mech.set_printoptions { sci_mode = true }
  T.eq(body(mech.tensor { 1.5, 2 }), "[1.5000e+00, 2.0000e+00]")
  T.eq(mech.get_printoptions().sci_mode, true)
  mech.set_printoptions { sci_mode = false }
  T.eq(body(mech.tensor { 1e-5, 100 }), "[  0.0000, 100.0000]")
  mech.set_printoptions { sci_mode = "auto" }
  T.eq(body(mech.tensor { 1e-5, 100 }), "[1.0000e-05, 1.0000e+02]")
  T.raises(function() mech.set_printoptions { sci_mode = 1 } end, "bad argument #1 to 'mech.set_printoptions' (option 'sci_mode': expected true, false or \"auto\", got 1)")
  T.raises(function() mech.set_printoptions { precision = -1 } end,
    "bad argument #1 to 'mech.set_printoptions' (option 'precision': expected an integer in [0, 16], got -1)")
  T.raises(function() mech.set_printoptions { edgeitem = 2 } end, "bad argument #1 to 'mech.set_printoptions' (unknown option 'edgeitem'; did you mean 'edgeitems'?)")
  T.raises(function() mech.set_printoptions { threshold = -1 } end, "bad argument #1 to 'mech.set_printoptions' (option 'threshold': expected a number >= 0 (math.huge: never summarise), got -1.0)")
  T.raises(function() mech.set_printoptions { profile = "long" } end, "bad argument #1 to 'mech.set_printoptions' (option 'profile': expected 'default', 'short' or 'full', got 'long')")
  T.raises(function() mech.set_printoptions(3) end, "bad argument #1 to 'mech.set_printoptions' (a table expected, got 3)")
  mech.set_printoptions(saved)
  T.eq(mech.get_printoptions(), saved, "a table from get_printoptions restores")
end)

T.test("autograd through views and arithmetic", function()
  local x = mech.tensor({ { 1, 2 }, { 3, 4 } }, { requires_grad = true })
  local y = (x:transpose(0, 1):contiguous() * x):sum()
  y:backward()
  -- d/dx_ab Σ_ij x_ji·x_ij = 2·x_ba: the gradient is 2xᵀ
  T.eq(x.grad:tolist(), { { 2, 6 }, { 4, 8 } })
  T.truthy(x.is_leaf)
  x.grad = nil
  T.eq(x.grad, nil)
  T.raises(function() y:backward() end, "second time")
end)

T.test("no_grad and detach", function()
  local x = mech.ones(3, { requires_grad = true })
  local y = mech.no_grad(function() return x * 2 end)
  T.eq(y.grad_fn, nil)
  T.truthy(mech.grad_enabled())
  T.raises(function() mech.no_grad(function() error("boom") end) end, "boom")
  T.truthy(mech.grad_enabled(), "mode restored after an error")
  T.eq(x:detach().requires_grad, false)
end)

T.test("gradcheck from Lua", function()
  local a = mech.randn(3, 4, { requires_grad = true })
  local ok, msg = mech.gradcheck(function(t) return (t * t):exp():sum(1) end, { a }, { eps = 1e-3 })
  T.truthy(ok, msg)
end)

T.test("generators are deterministic", function()
  local g1, g2 = mech.Generator(7), mech.Generator(7)
  T.eq(mech.rand(5, { generator = g1 }):tolist(), mech.rand(5, { generator = g2 }):tolist())
  mech.manual_seed(3)
  local a = mech.randn(4):tolist()
  mech.manual_seed(3)
  T.eq(mech.randn(4):tolist(), a)
  T.truthy(g1:below(10) < 10)
end)

T.test("mech.randint: int32 in [low, high), one gen:below draw each, bad bounds refused", function()
  local x = mech.randint(3, 7, 200, 5, { generator = mech.Generator(1) })
  T.eq(x:dtype(), "int32")
  T.eq(x:shape(), { 200, 5 })
  T.eq(x:min():item(), 3)
  T.eq(x:max():item(), 6, "high is excluded, every value reached")
  local g, expect = mech.Generator(9), {}
  for i = 1, 6 do expect[i] = -2 + g:below(5) end
  T.eq(mech.randint(-2, 3, { 6 }, { generator = mech.Generator(9) }):tolist(), expect)
  T.eq(mech.randint(-2147483647, 2147483648, 4):dtype(), "int32", "up to 2^32 - 1 values")
  T.raises(function() mech.randint(5, 5, 3) end, "bad argument #2 to 'mech.randint' (an integer above argument 1, at most 2^31 and less than 2^32 above it (excluded) expected, got 5)")
  T.raises(function() mech.randint(0, 2 ^ 31 + 1 | 0, 3) end, "bad argument #2 to 'mech.randint' (an integer above argument 1, at most 2^31 and less than 2^32 above it (excluded) expected, got 2147483649)")
  T.raises(function() mech.randint(0.5, 2, 3) end, "mech.randint")
  T.raises(function() mech.randint(0, 2, 3, "x") end, "bad argument #4 to 'mech.randint' (a table of options {generator=} expected, got 'x')")
end)

T.test("errors name the function, argument, expectation and what came", function()
  T.raises(function() mech.zeros(-3) end, "bad argument #1 to 'mech.zeros' (a size (integer >= 0) expected, got -3)")
  T.raises(function() mech.zeros(2, { dtype = "float64" }) end, "bad argument #2 to 'mech.zeros' (option 'dtype': expected 'float32' or 'int32', got 'float64')")
  T.raises(function() mech.tensor { { 1, 2 }, { 3 } } end, "not rectangular")
  T.raises(function() mech.tensor { "a" } end, "expected numbers")
  local t = mech.zeros(2, 3)
  T.raises(function() return t[{ 2 }] end, "index 2 out of range for dim 0 of size 2")
  T.raises(function() return t[{ 0, 0, 0 }] end, "3 indices for a tensor with 2 dimensions")
  T.raises(function() return t.nope end, "no method or field 'nope'")
  T.raises(function() t:view(4, 2) end, "invalid for a tensor of shape [2,3]")
  T.raises(function() t:narrow(5, 0, 1) end, "bad argument #1 to 'tensor:narrow' (expected a dimension in [-2, 1], got 5)")
  T.raises(function() t:get(0) end, "bad argument #2 to 'tensor:get' (an integer index expected, got no value)")
  T.raises(function() mech.zeros(2, 2):expand(3, 3) end, "cannot expand")
  T.raises(function() t.shape(nil) end, "calling 'tensor:shape' on bad self (a tensor expected, got nil)")
  T.raises(function() mech.tensor({ 1 }, { requires_grad = true, dtype = "int32" }) end, "only float32")
  T.raises(function() mech.zeros(1e6, 1e6, 1e6) end, "too large")
end)

T.test("tables of integers stand for int32 tensors (token ids, targets, rows, indices)", function()
  local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 } -- 13 tokens a document
  local model = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = task:vocab_size(), seed = 5 }
  local tokens = task:dataset(2, { seed = 1 }):batch(0, 2)
  local s = "blocks.0.block_input"
  local answers = { tokens:get(0, 12), tokens:get(1, 12) }
  local _, _, want = model:run_with_cache(tokens, { names = { s }, grads = true,
    targets = mech.tensor(answers, { dtype = "int32" }), rows = mech.tensor({ 11, 11 }, { dtype = "int32" }) })
  local logits, _, got = model:run_with_cache(tokens:tolist(), { names = { s }, grads = true, targets = answers,
    rows = { 11, 11 } })
  T.truthy(got[s]:equal(want[s]), "the same gradients from tables")
  T.truthy(logits:equal(model:forward(tokens)))
  local patched = mech.interp.patch(model, tokens:tolist(), { site = s, source = mech.zeros(13, 16) })
  T.eq(patched:shape(), { 2, 13, task:vocab_size() })
  T.raises(function() model:run_with_cache(tokens, { grads = true, targets = answers, rows = { 11, 1.5 } }) end,
    "run_with_cache: option 'rows': expected integers in int32 range, got 1.5 at a leaf")
  T.raises(function() model:run_with_cache(tokens, { grads = true, targets = mech.zeros(2) }) end,
    "run_with_cache: option 'targets': expected an int32 tensor or a table of integers, got a float32 tensor of shape [2]")
  T.raises(function() model:run_with_cache({ { 1, 2 }, { 3 } }) end, "bad argument #1 to 'model:run_with_cache' (is not rectangular: a row at depth 1 has 1 entries, expected 2)")
end)

T.test("__close releases storage at scope end", function()
  collectgarbage("collect")
  local before = mech.memory_bytes()
  do
    local big <close> = mech.zeros(1024, 1024)
    T.truthy(mech.memory_bytes() >= before + 4 * 1024 * 1024)
  end
  T.truthy(mech.memory_bytes() < before + 4 * 1024 * 1024)
end)

T.test("memory held by tensors is visible to the collector", function()
  -- 1,200 tensors of 1 MB each (1.2 GB in total) must not accumulate: uncounted, they would
  -- pass the 512 MB bound before half of them (2,000 took 20 s under the sanitizers)
  local peak = 0
  for i = 1, 1200 do
    local t = mech.zeros(256, 1024)
    if i % 100 == 0 then peak = math.max(peak, mech.memory_bytes()) end
  end
  T.truthy(peak < 512 * 1024 * 1024, string.format("peak live tensor memory %.0f MB", peak / 2 ^ 20))
end)

T.done()
