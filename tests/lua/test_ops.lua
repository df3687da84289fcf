-- The ops binding: every op as a method and a mech.* function, metamethods, gradients through
-- Lua, and error paths (each names the function and the argument; none crashes).
local T = require "check"

local function t(v, opts) return mech.tensor(v, opts) end
local function leaf(v) return mech.tensor(v, {requires_grad = true}) end
local function list(x) return x:tolist() end

-- ------------------------------------------------------------------ elementwise

T.test("binary methods, functions and broadcasting", function()
  local a, b = t {{1, 2, 3}, {4, 5, 6}}, t {10, 20, 30}
  T.near(list(a:add(b)), {{11, 22, 33}, {14, 25, 36}})
  T.near(list(mech.add(a, b)), {{11, 22, 33}, {14, 25, 36}})
  T.near(list(a:sub(1)), {{0, 1, 2}, {3, 4, 5}})
  T.near(list(mech.sub(1, a)), {{0, -1, -2}, {-3, -4, -5}})
  T.near(list(a:mul(b)), {{10, 40, 90}, {40, 100, 180}})
  T.near(list(a:div(2)), {{0.5, 1, 1.5}, {2, 2.5, 3}})
  T.near(list(a:pow(2)), {{1, 4, 9}, {16, 25, 36}})
  T.near(list(a:maximum(3)), {{3, 3, 3}, {4, 5, 6}})
  T.near(list(mech.minimum(a, {2, 2, 7})), {{1, 2, 3}, {2, 2, 6}})
  T.near(list(a:add({1, 1, 1})), {{2, 3, 4}, {5, 6, 7}}, 1e-6, "a table operand")
end)

T.test("arithmetic metamethods with numbers on either side", function()
  local a = t {1, 2, 4}
  T.near(list(a + a), {2, 4, 8})
  T.near(list(a + 1), {2, 3, 5})
  T.near(list(1 + a), {2, 3, 5})
  T.near(list(10 - a), {9, 8, 6})
  T.near(list(a - 10), {-9, -8, -6})
  T.near(list(a * 3), {3, 6, 12})
  T.near(list(3 * a), {3, 6, 12})
  T.near(list(a / 2), {0.5, 1, 2})
  T.near(list(8 / a), {8, 4, 2})
  T.near(list(a ^ 2), {1, 4, 16})
  T.near(list(2 ^ a), {2, 4, 16})
  T.near(list(-a), {-1, -2, -4})
  T.near(list((a + 1) * (a - 1) / 3), {0, 1, 5})
end)

T.test("int32 arithmetic and comparisons", function()
  local i = t({7, -8, 9}, {dtype = "int32"})
  T.eq((i + 1):dtype(), "int32")
  T.eq(list(i + 1), {8, -7, 10})
  T.eq(list(i * i), {49, 64, 81})
  T.eq(list(-i), {-7, 8, -9})
  T.eq(list(i:abs()), {7, 8, 9})
  T.eq((i / 2):dtype(), "float32")
  T.near(list(i / 2), {3.5, -4, 4.5})
  T.eq((i + 0.5):dtype(), "float32")
  local a, b = t {1, 2, 3}, t {2, 2, 2}
  T.eq(a:lt(b):dtype(), "int32")
  T.eq(list(a:lt(b)), {1, 0, 0})
  T.eq(list(a:le(b)), {1, 1, 0})
  T.eq(list(a:gt(b)), {0, 0, 1})
  T.eq(list(a:ge(2)), {0, 1, 1})
  T.eq(list(mech.eq(a, b)), {0, 1, 0})
  T.eq(list(a:ne(b)), {1, 0, 1})
end)

T.test("unary methods and functions", function()
  local x = t {-1, 0.5, 2}
  local cases = {
    neg = function(v) return -v end, exp = math.exp, abs = math.abs, tanh = function(v)
      return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end,
    sigmoid = function(v) return 1 / (1 + math.exp(-v)) end, relu = function(v) return v > 0 and v or 0 end,
    silu = function(v) return v / (1 + math.exp(-v)) end, softplus = function(v) return math.log(1 + math.exp(v)) end,
    sin = math.sin, cos = math.cos,
  }
  for name, f in pairs(cases) do
    local want = {f(-1), f(0.5), f(2)}
    T.near(list(x[name](x)), want, 1e-5, name .. " method")
    T.near(list(mech[name](x)), want, 1e-5, name .. " function")
  end
  local p = t {0.25, 1, 4}
  T.near(list(p:log()), {math.log(0.25), 0, math.log(4)}, 1e-6)
  T.near(list(p:sqrt()), {0.5, 1, 2})
  T.near(t({1}):gelu():item(), 0.8413447460685429, 1e-6)
  T.near(t({30}):softplus():item(), 30)
end)

T.test("clamp, where and allclose", function()
  local a = t {-2, -1, 0, 1, 2}
  T.near(list(a:clamp(-1, 1)), {-1, -1, 0, 1, 1})
  T.near(list(a:clamp(nil, 0.5)), {-2, -1, 0, 0.5, 0.5})
  T.near(list(mech.clamp(a, 0)), {0, 0, 0, 1, 2})
  local c = t({{1}, {0}}, {dtype = "int32"})
  T.near(list(mech.where(c, t {1, 2, 3}, 0)), {{1, 2, 3}, {0, 0, 0}})
  T.near(list(mech.where(a:gt(0), a, -a)), {2, 1, 0, 1, 2})
  T.near(list(a:where(a:lt(0), 9)), {-2, -1, 9, 9, 9}, 1e-6, "method form: where(cond, self, other)")
  T.eq(a:allclose(a * (1 + 1e-6)), true)
  T.eq(mech.allclose(a, a + 0.1), false)
  T.eq(a:allclose(a + 0.1, 0, 0.2), true)
  T.eq(a:allclose(t {1, 2}), false)
end)

-- ------------------------------------------------------------------ reductions

T.test("reductions with dims, keepdim and all", function()
  local a = t {{1, 5, 3}, {4, 2, 6}}
  T.near(a:sum():item(), 21)
  T.near(mech.sum(a):item(), 21)
  T.near(list(a:sum(0)), {5, 7, 9})
  T.near(list(a:sum(-1, true)), {{9}, {12}})
  T.eq(a:sum(1, true):shape(), {2, 1})
  T.near(list(a:mean(1)), {3, 4})
  T.near(a:mean():item(), 3.5)
  local v, i = a:max(1)
  T.near(list(v), {5, 6})
  T.eq(list(i), {1, 2})
  T.eq(i:dtype(), "int32")
  local mv, mi = mech.min(a, 0, true)
  T.near(list(mv), {{1, 2, 3}})
  T.eq(list(mi), {{0, 1, 0}})
  T.near(a:max():item(), 6)
  T.near(list(a:max(t {3, 3, 3})), {{3, 5, 3}, {4, 3, 6}}, 1e-6, "max with a tensor is maximum")
  T.eq(list(a:argmax(1)), {1, 2})
  T.eq(a:argmax():item(), 5)
  T.eq(list(mech.argmin(a, 0)), {0, 1, 0})
  T.near(list(a:var(1)), {4, 4})
  T.near(list(a:var(1, false, 0)), {8 / 3, 8 / 3}, 1e-6)
  T.near(a:var():item(), 3.5)
end)

-- ------------------------------------------------------------------ matmul, linear, softmax

T.test("matmul semantics", function()
  local a, b = t {{1, 2, 3}, {4, 5, 6}}, t {{7, 8}, {9, 10}, {11, 12}}
  T.near(list(a:matmul(b)), {{58, 64}, {139, 154}})
  T.near(list(mech.matmul(a, b)), {{58, 64}, {139, 154}})
  T.near(list(a:matmul(a:transpose())), {{14, 32}, {32, 77}}, 1e-5, "a transposed view")
  T.near(t({1, 0, -1}):matmul(t {1, 0, -1}):item(), 2)
  T.near(list(a:matmul(t {1, 0, -1})), {-2, -2})
  local batch = mech.randn(4, 2, 3)
  T.eq(batch:matmul(b):shape(), {4, 2, 2})
  T.eq(mech.randn(2, 1, 2, 3):matmul(mech.randn(5, 3, 4)):shape(), {2, 5, 2, 4})
end)

T.test("linear", function()
  local x, w, b = t {{1, 2, 3}, {4, 5, 6}}, t {{1, 0, 0}, {0, 1, 1}}, t {10, 20}
  T.near(list(x:linear(w, b)), {{11, 25}, {14, 31}})
  T.near(list(mech.linear(x, w)), {{1, 5}, {4, 11}})
end)

T.test("softmax and log_softmax", function()
  local a = t {{1, 2, 3}, {1000, 1000, 1000}}
  local s = a:softmax()
  local e1, e2, e3 = math.exp(1), math.exp(2), math.exp(3)
  local z = e1 + e2 + e3
  T.near(list(s), {{e1 / z, e2 / z, e3 / z}, {1 / 3, 1 / 3, 1 / 3}}, 1e-6)
  T.near(list(mech.softmax(a, 0)), {{0, 0, 0}, {1, 1, 1}}, 1e-6)
  T.near(list(a:log_softmax(1)), {{1 - math.log(z), 2 - math.log(z), 3 - math.log(z)},
    {-math.log(3), -math.log(3), -math.log(3)}}, 1e-5)
end)

-- ------------------------------------------------------------------ indexing and joining

T.test("gather, index_select, scatter_add, embedding", function()
  local a = t {{1, 2}, {3, 4}, {5, 6}}
  local gi = t({{2, 0}, {1, 1}}, {dtype = "int32"})
  T.near(list(a:gather(0, gi)), {{5, 2}, {3, 4}})
  T.near(list(mech.gather(a, 1, {{1}, {0}, {1}})), {{2}, {3}, {6}}, 1e-6, "index from a table")
  T.near(list(a:index_select(0, {2, 0})), {{5, 6}, {1, 2}})
  T.near(list(mech.index_select(a, 1, t({1}, {dtype = "int32"}))), {{2}, {4}, {6}})
  T.near(list(a:scatter_add(0, gi, t {{10, 20}, {30, 40}})), {{1, 22}, {33, 44}, {15, 6}})
  local ids = t({{2, 0}, {0, 1}}, {dtype = "int32"})
  T.eq(a:embedding(ids):shape(), {2, 2, 2})
  T.near(list(mech.embedding(a, ids)), {{{5, 6}, {1, 2}}, {{1, 2}, {3, 4}}})
end)

T.test("cat, stack, split", function()
  local a, b = t {{1, 2}, {3, 4}}, t {{5}, {6}}
  T.near(list(mech.cat({a, b}, 1)), {{1, 2, 5}, {3, 4, 6}})
  T.near(list(mech.cat({a, a})), {{1, 2}, {3, 4}, {1, 2}, {3, 4}})
  T.near(list(a:cat(b, 1)), {{1, 2, 5}, {3, 4, 6}})
  T.near(list(a:cat({a, a}, 0)), {{1, 2}, {3, 4}, {1, 2}, {3, 4}, {1, 2}, {3, 4}})
  T.eq(mech.stack({a, a}, 1):shape(), {2, 2, 2})
  T.near(list(mech.stack({a, a}, -1)), {{{1, 1}, {2, 2}}, {{3, 3}, {4, 4}}})
  T.eq(a:stack(a):shape(), {2, 2, 2})
  local p, q, r = mech.arange(5):split(2)
  T.near(list(p), {0, 1})
  T.near(list(q), {2, 3})
  T.near(list(r), {4})
  local n = select("#", t({{1, 2, 3}}):split(1, 1))
  T.eq(n, 3)
end)

-- ------------------------------------------------------------------ gradients through Lua

T.test("gradients through methods and metamethods", function()
  local x = leaf {1, -2, 3}
  local y = (x * x + 2 * x):sum()
  y:backward()
  T.near(list(x.grad), {4, -2, 8})
  local w = leaf {{1, 2}, {3, 4}}
  local loss = w:matmul(w:transpose()):softmax():log():mean()
  loss:backward()
  T.eq(w.grad:shape(), {2, 2})
  T.truthy(y.grad_fn == "SumBackward", "grad_fn names the node")
end)

T.test("mech.gradcheck on ops composed in Lua", function()
  local ok, err = mech.gradcheck(function(a, b)
    return (a:matmul(b):tanh() * a:sum(1, true)):log_softmax(0):gather(1, {{0, 1}, {1, 1}})
  end, {mech.randn(2, 3, {requires_grad = true}), mech.randn(3, 2, {requires_grad = true})},
    {eps = 1e-3, atol = 3e-3, rtol = 2e-2})
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(e) return e:embedding({{0, 3}, {3, 3}}):var(1) end,
    {mech.randn(4, 3, {requires_grad = true})}, {eps = 1e-3, atol = 3e-3, rtol = 2e-2})
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(a, b)
    local p, q = mech.cat({a, b}, 1):clamp(-5, 5):split(2, 1)
    return mech.where(p:gt(0), p, q:sigmoid()) + p:max(1, true) - a:linear(b:transpose())
  end, {mech.randn(2, 2, {requires_grad = true}), mech.randn(2, 2, {requires_grad = true})},
    {eps = 1e-3, atol = 3e-3, rtol = 2e-2})
  T.truthy(ok, err)
end)

-- ------------------------------------------------------------------ sorting, norms, scans, einsum

T.test("int32 rows of up to 32 sort as float ones do (their own fast path): stable, both ways, extremes", function()
  local g = mech.Generator(3)
  for _, n in ipairs {1, 2, 5, 16, 32, 33} do
    for _, desc in ipairs {false, true} do
      local x = mech.randint(-3, 4, 40, n, {generator = g}) -- many ties
      x[{0, 0}] = -2147483648
      if n > 1 then x[{1, 1}] = 2147483647 end
      T.eq(list(x:argsort(1, desc)), list(x:float():argsort(1, desc)), "n = " .. n)
      T.eq(list(x.T:argsort(0, desc)), list(x.T:float():argsort(0, desc)), "strided, n = " .. n)
    end
  end
  T.eq(list(mech.argsort(t({2, 1, 2, 1}, {dtype = "int32"}), 0, true)), {0, 2, 1, 3}, "stable descending")
end)

T.test("sort, argsort and topk return values and 0-based indices", function()
  local a = t {{3, 1, 2}, {0, -1, 5}}
  local v, i = a:sort()
  T.near(list(v), {{1, 2, 3}, {-1, 0, 5}})
  T.eq(list(i), {{1, 2, 0}, {1, 0, 2}})
  v, i = mech.sort(a, 0, true)
  T.near(list(v), {{3, 1, 5}, {0, -1, 2}})
  T.eq(list(i), {{0, 0, 1}, {1, 1, 0}})
  T.eq(list(a:argsort(-1, true)), {{0, 2, 1}, {2, 0, 1}})
  T.eq(list(mech.argsort(t {2, 1, 2, 1})), {1, 3, 0, 2}, "stable on ties")
  v, i = a:topk(2)
  T.near(list(v), {{3, 2}, {5, 0}})
  T.eq(list(i), {{0, 2}, {2, 0}})
  v, i = a:topk(1, 0, false)
  T.near(list(v), {{0, -1, 2}})
  T.eq(list(i), {{1, 1, 0}})
  T.eq(i:dtype(), "int32")
  local x = leaf {4, 1, 3}
  v = x:topk(2)
  v:sum():backward()
  T.near(list(x.grad), {1, 0, 1}, 1e-6, "the gradient reaches the chosen elements")
end)

T.test("norm, std, var and cumsum", function()
  local b = t {{3, -4}, {1, 2}}
  T.near(b:norm():item(), math.sqrt(30), 1e-6)
  T.near(list(b:norm(1, 1)), {7, 3})
  T.near(list(mech.norm(b, math.huge, 0, true)), {{3, 4}})
  T.near(b:norm(-math.huge):item(), 1)
  T.near(b:norm(0):item(), 4)
  T.near(list(b:std(0)), {math.sqrt(2), math.sqrt(18)}, 1e-6)
  T.near(b:std(nil, false, 0):item(), math.sqrt(7.25), 1e-6)
  T.near(list(mech.std(b, 1, true)), {{math.sqrt(24.5)}, {math.sqrt(0.5)}}, 1e-6)
  T.near(list(b:cumsum(0)), {{3, -4}, {4, -2}})
  T.near(list(mech.cumsum(b, -1)), {{3, -1}, {1, 3}})
  T.eq(list(mech.arange(4):cumsum(0)), {0, 1, 3, 6})
  T.eq(mech.arange(4):cumsum(0):dtype(), "int32")
end)

T.test("flatten, t.T and t.mT", function()
  local a = mech.arange(24):reshape(2, 3, 4)
  T.eq(a:flatten():shape(), {24})
  T.eq(a:flatten(1):shape(), {2, 12})
  T.eq(mech.flatten(a, 0, 1):shape(), {6, 4})
  T.eq(a:flatten(-2, -1):shape(), {2, 12})
  T.eq(a.T:shape(), {4, 3, 2}, "T reverses every dim")
  T.eq(a.T[{3, 2, 1}], a[{1, 2, 3}])
  T.eq(a.mT:shape(), {2, 4, 3}, "mT swaps the last two")
  T.eq(a.mT[{1, 3, 2}], a[{1, 2, 3}])
  local m = t {{1, 2}, {3, 4}}
  T.near(list(m.T), {{1, 3}, {2, 4}})
  T.eq(t {1, 2}.T:shape(), {2})
  T.raises(function() return t {1, 2}.mT end, "tensor.mT: expected a tensor with at least 2 dimensions, got 1")
end)

T.test("einsum for the common contractions", function()
  local x, y = mech.randn(2, 3, 4), mech.randn(2, 5, 4)
  T.truthy(mech.einsum("bld,bmd->blm", x, y):allclose(x:matmul(y.mT), 1e-5, 1e-6), "bld,bmd->blm")
  local a, b = mech.randn(3, 4), mech.randn(4, 2)
  T.truthy(mech.einsum("ij,jk->ik", a, b):allclose(a:matmul(b), 1e-5, 1e-6), "matmul")
  T.truthy(mech.einsum("ij,jk", a, b):allclose(a:matmul(b), 1e-5, 1e-6), "implicit output")
  T.truthy(mech.einsum("bij,bjk->bik", x, y.mT):allclose(x:matmul(y.mT), 1e-5, 1e-6), "batched matmul")
  T.near(list(mech.einsum("i,j->ij", {1, 2}, {1, 10, 100})), {{1, 10, 100}, {2, 20, 200}})
  T.truthy(mech.einsum("ij->ji", a):equal(a.T:contiguous()), "transpose")
  T.truthy(mech.einsum("bld->dlb", x):equal(x:permute(2, 1, 0):contiguous()), "permutation")
  T.near(mech.einsum("ij->", a):item(), a:sum():item(), 1e-5)
  T.near(list(mech.einsum("ij->j", a)), list(a:sum(0)), 1e-5)
  T.near(mech.einsum("ii", t {{1, 2}, {3, 4}}):item(), 5)
  T.near(list(mech.einsum("ii->i", t {{1, 2}, {3, 4}})), {1, 4})
  T.eq(mech.einsum("...ij,jk->...ik", x, mech.randn(4, 6)):shape(), {2, 3, 6})
end)

T.test("gradchecks of the new ops from Lua", function()
  local opts = {eps = 1e-3, atol = 3e-3, rtol = 2e-2}
  local function distinct(...) -- no ties and nothing at 0: kinks of sort, topk and norm stay away
    local n = 1
    for _, s in ipairs {...} do n = n * s end
    local spaced = (mech.randn(n):argsort():float() - n / 2 + 0.5) * 0.1 -- a shuffled grid, 0.05 off 0
    return spaced:reshape(...):requires_grad_()
  end
  T.truthy(mech.gradcheck(function(a) return (a:sort(1)) end, {distinct(3, 4)}, opts))
  T.truthy(mech.gradcheck(function(a) return (a:topk(2, 0)) end, {distinct(3, 4)}, opts))
  for _, p in ipairs {2, 1, 3, math.huge} do
    local ok, err = mech.gradcheck(function(a) return a:norm(p, 1) end, {distinct(3, 4)}, opts)
    T.truthy(ok, "p = " .. p .. ": " .. tostring(err))
  end
  T.truthy(mech.gradcheck(function(a) return a:std(0) end, {mech.randn(3, 4, {requires_grad = true})}, opts))
  T.truthy(mech.gradcheck(function(a) return a:cumsum(1) end, {mech.randn(3, 4, {requires_grad = true})}, opts))
  T.truthy(mech.gradcheck(function(a) return a.T:flatten() end, {mech.randn(3, 4, {requires_grad = true})}, opts))
  T.truthy(mech.gradcheck(function(a, b) return mech.einsum("bld,bmd->blm", a, b) end,
    {mech.randn(2, 3, 4, {requires_grad = true}), mech.randn(2, 5, 4, {requires_grad = true})}, opts))
end)

-- ------------------------------------------------------------------ functional layers

T.test("layer_norm, rms_norm and causal_conv1d: values by hand", function()
  local x = t {{1, 2, 3, 6}, {-1, 0, 0, 1}}
  local w, b = t {1, 2, 0.5, -1}, t {0, 0.5, 1, 0}
  local y = mech.layer_norm(x, w, b):tolist()
  local yr = mech.rms_norm(x, w, 1e-6):tolist()
  for r, row in ipairs(x:tolist()) do
    local mean, var, ms = 0, 0, 0
    for _, v in ipairs(row) do mean = mean + v / 4; ms = ms + v * v / 4 end
    for _, v in ipairs(row) do var = var + (v - mean) ^ 2 / 4 end
    for i, v in ipairs(row) do
      local wi, bi = w:tolist()[i], b:tolist()[i]
      T.near(y[r][i], (v - mean) / math.sqrt(var + 1e-5) * wi + bi, 1e-5)
      T.near(yr[r][i], v / math.sqrt(ms + 1e-6) * wi, 1e-5)
    end
  end
  T.near(mech.layer_norm(x, w):tolist()[1], mech.layer_norm(x, w, mech.zeros(4)):tolist()[1], 0, "no bias")
  -- causal depthwise conv: out[t, d] = bias[d] + sum_k w[d, k] * x[t - (K-1) + k, d]
  local xs = t {{{1, 10}, {2, 20}, {3, 30}, {4, 40}}} -- (B=1, L=4, D=2)
  local cw, cb = t {{1, 2, 3}, {0.5, 0, -1}}, t {0.25, -1}
  local out = mech.causal_conv1d(xs, cw, cb):tolist()[1]
  for ti = 1, 4 do
    for d = 1, 2 do
      local acc = cb:tolist()[d]
      for k = 1, 3 do
        local src = ti - 3 + k
        if src >= 1 then acc = acc + cw:tolist()[d][k] * xs:tolist()[1][src][d] end
      end
      T.near(out[ti][d], acc, 1e-5, "t " .. ti .. " d " .. d)
    end
  end
  -- PyTorch's (D, 1, K) depthwise weight is the same conv
  T.eq(mech.causal_conv1d(xs, cw:reshape(2, 1, 3), cb):tolist(), mech.causal_conv1d(xs, cw, cb):tolist())
  T.eq(mech.causal_conv1d(xs, cw):shape(), {1, 4, 2})
end)

T.test("gradchecks of layer_norm, rms_norm and causal_conv1d", function()
  local opts = {eps = 1e-3, atol = 3e-3, rtol = 2e-2}
  local function r(...)
    local dims = {...}
    dims[#dims + 1] = {requires_grad = true}
    return mech.randn(table.unpack(dims))
  end
  local ok, err = mech.gradcheck(function(x, w, b) return mech.layer_norm(x, w, b) end, {r(2, 3, 5), r(5), r(5)}, opts)
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(x, w) return mech.layer_norm(x, w, nil, 1e-3) end, {r(4, 6), r(6)}, opts)
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(x, w) return mech.rms_norm(x, w) end, {r(2, 3, 5), r(5)}, opts)
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(x, w, b) return mech.causal_conv1d(x, w, b) end, {r(2, 6, 3), r(3, 4), r(3)}, opts)
  T.truthy(ok, err)
  ok, err = mech.gradcheck(function(x, w) return mech.causal_conv1d(x, w) end, {r(1, 5, 2), r(2, 1, 2)}, opts)
  T.truthy(ok, err)
end)

T.test("layer_norm, rms_norm and causal_conv1d: shape and argument errors", function()
  local x = mech.randn(2, 3, 4)
  T.raises(function() mech.layer_norm(x, mech.ones(3)) end, "bad argument #2 to 'mech.layer_norm' (has shape [3], expected [4])")
  T.raises(function() mech.layer_norm(x, mech.ones(4), mech.ones(5)) end, "bad argument #3 to 'mech.layer_norm' (has shape [5], expected [4])")
  T.raises(function() mech.layer_norm(x) end, "bad argument #2 to 'mech.layer_norm' (a tensor, a number or a table of numbers expected, got no value)")
  T.raises(function() mech.layer_norm(x, mech.ones(4), nil, -1) end, "bad argument #4 to 'mech.layer_norm' (a finite eps >= 0 expected, got -1)")
  T.raises(function() mech.layer_norm(x, mech.ones(4), nil, "a") end, "bad argument #4 to 'mech.layer_norm' (a number expected, got 'a')")
  T.raises(function() mech.layer_norm(mech.tensor({1, 2}, {dtype = "int32"}), mech.ones(2)) end, "bad argument #1 to 'mech.layer_norm' (expected a float32 tensor, got int32)")
  T.raises(function() mech.rms_norm(x, mech.ones(2, 2)) end, "bad argument #2 to 'mech.rms_norm' (has shape [2,2], expected [4])")
  T.raises(function() mech.rms_norm(x, mech.ones(4), 0 / 0) end, "bad argument #3 to 'mech.rms_norm' (a finite eps >= 0 expected, got -nan)")
  T.raises(function() mech.rms_norm("x", mech.ones(4)) end, "bad argument #1 to 'mech.rms_norm' (a tensor, a number or a table of numbers expected, got 'x')")
  T.raises(function() mech.causal_conv1d(mech.randn(3, 4), mech.ones(4, 2)) end,
    "bad argument #1 to 'mech.causal_conv1d' (has 2 dimensions, expected [B,L,C])")
  T.raises(function() mech.causal_conv1d(x, mech.ones(3, 2)) end, "bad argument #2 to 'mech.causal_conv1d' (has shape [3,2], expected [C,K] or [C,1,K] with C=4)")
  T.raises(function() mech.causal_conv1d(x, mech.ones(4, 0)) end, "bad argument #2 to 'mech.causal_conv1d' (has kernel width 0)")
  T.raises(function() mech.causal_conv1d(x, mech.ones(4, 2), mech.ones(3)) end, "bad argument #3 to 'mech.causal_conv1d' (has shape [3], expected [C] with C=4)")
end)

-- ------------------------------------------------------------------ error paths

T.test("wrong types name the function and the argument", function()
  local a = t {{1, 2}, {3, 4}}
  T.raises(function() return a:add("x") end, "bad argument #1 to 'tensor:add' (a tensor, a number or a table of numbers expected, got 'x')")
  T.raises(function() return mech.mul(true, a) end, "bad argument #1 to 'mech.mul' (a tensor, a number or a table of numbers expected, got boolean)")
  T.raises(function() return mech.exp("x") end, "bad argument #1 to 'mech.exp' (a tensor, a number or a table of numbers expected, got 'x')")
  T.raises(function() return mech.sum({}, "a") end, "bad argument #2 to 'mech.sum' (an integer dimension expected, got 'a')")
  T.raises(function() return a:sum(0, 1) end, "bad argument #2 to 'tensor:sum' (a boolean expected, got 1)")
  T.raises(function() return a:sum(0.5) end, "bad argument #1 to 'tensor:sum' (an integer dimension expected, got 0.5)")
  T.raises(function() return a:clamp("lo") end, "bad argument #1 to 'tensor:clamp' (a number expected, got 'lo')")
  T.raises(function() return a:matmul(nil) end, "bad argument #1 to 'tensor:matmul' (a tensor, a number or a table of numbers expected, got nil)")
  T.raises(function() return mech.cat(a, 0) end, "bad argument #2 to 'mech.cat' (a list of tensors expected, got 0)")
  T.raises(function() return mech.cat({a, 3}) end, "bad argument #1 to 'mech.cat' (element 2 expected a tensor, got number)")
  T.raises(function() return mech.cat({}) end, "bad argument #1 to 'mech.cat' (expected a non-empty list of tensors)")
  T.raises(function() return a:split("x") end, "bad argument #1 to 'tensor:split' (an integer size expected, got 'x')")
  T.raises(function() return a:split(0) end, "bad argument #1 to 'tensor:split' (a size > 0 expected, got 0)")
  T.raises(function() return a:var(0, false, -1) end, "bad argument #3 to 'tensor:var' (a correction >= 0 expected, got -1)")
  T.raises(function() return a:allclose(a, "x") end, "bad argument #2 to 'tensor:allclose' (a number expected, got 'x')")
  T.raises(function() return a:topk("k") end, "bad argument #1 to 'tensor:topk' (an integer k expected, got 'k')")
  T.raises(function() return a:topk(9) end, "bad argument #1 to 'tensor:topk' (expected k in [0, 2] (the size of dim 1), got 9)")
  T.raises(function() return a:sort(0, "yes") end, "bad argument #2 to 'tensor:sort' (a boolean expected, got 'yes')")
  T.raises(function() return a:norm("fro") end, "bad argument #1 to 'tensor:norm' (a number expected, got 'fro')")
  T.raises(function() return a:cumsum() end, "bad argument #1 to 'tensor:cumsum' (an integer dimension expected, got no value)")
  T.raises(function() return a:cumsum(2) end, "bad argument #1 to 'tensor:cumsum' (expected a dimension in [-2, 1], got 2)")
  T.raises(function() return a:flatten(1, 0) end, "bad argument #1 to 'tensor:flatten' ((start_dim 1) expected a dimension at or before argument 3 (end_dim 0))")
  T.raises(function() return a:std(0, false, -1) end, "bad argument #3 to 'tensor:std' (a correction >= 0 expected, got -1)")
  T.raises(function() return mech.einsum(a, a) end, "bad argument #1 to 'mech.einsum' (a spec string such as \"ij,jk->ik\" expected, got a float32 tensor of shape [2,2])")
  T.raises(function() return mech.einsum("ij,jk->ik", a, mech.zeros(3, 2)) end,
    "einsum: label 'j' has size 3 in argument 3, but 2 in argument 2")
  T.raises(function() return mech.einsum("ij") end, "einsum: expected 1 to 16 tensors after the spec, got 0")
  T.raises(function() return mech.einsum("ij", "x") end, "bad argument #2 to 'mech.einsum' (a tensor, a number or a table of numbers expected, got 'x')")
  T.raises(function() return a:gather(0, "i") end, "bad argument #2 to 'tensor:gather' (expected an int32 tensor or a table of integers, got 'i')")
  T.raises(function() return a:add({{1, 2}, {3}}) end, "not rectangular")
end)

T.test("shape, dim and dtype errors come from the core with context", function()
  local a = t {{1, 2, 3}, {4, 5, 6}}
  T.raises(function() return a + t {1, 2} end, "add: shapes [2,3] and [2] do not broadcast")
  T.raises(function() return a:matmul(t {{1, 2}, {3, 4}}) end, "bad argument #1 to 'tensor:matmul' (has shape [2,2], expected [3,*])")
  T.raises(function() return a:matmul(mech.zeros(2, 3, {dtype = "int32"})) end,
    "bad argument #1 to 'tensor:matmul' (expected a float32 tensor, got int32)")
  T.raises(function() return a:sum(2) end, "bad argument #1 to 'tensor:sum' (expected a dimension in [-2, 1], got 2)")
  T.raises(function() return a:sum(1000) end, "bad argument #1 to 'tensor:sum' (expected a dimension in [-2, 1], got 1000)")
  T.raises(function() return a:max(-3) end, "bad argument #1 to 'tensor:max' (expected a dimension in [-2, 1], got -3)")
  T.raises(function() return a:softmax(5) end, "bad argument #1 to 'tensor:softmax' (expected a dimension in [-2, 1], got 5)")
  T.raises(function() return a:gather(0, t {{0.0}}) end,
    "bad argument #2 to 'tensor:gather' (expected an int32 tensor or a table of integers, got a float32 tensor of shape [1,1])")
  T.raises(function() return a:gather(0, {{0.5}}) end, "bad argument #2 to 'tensor:gather' (expected integers in int32 range, got 0.5 at a leaf)")
  T.raises(function() return a:index_select(0, {2 ^ 40}) end, "bad argument #2 to 'tensor:index_select' (expected integers in int32 range, got 1099511627776.0 at a leaf)")
  T.raises(function() return a:embedding("x") end,
    "bad argument #1 to 'tensor:embedding' (expected an int32 tensor or a table of integers, got 'x')")
  T.raises(function() return a:gather(0, {{9}}) end, "gather: index 9 out of range for dim 0 of size 2")
  T.raises(function() return a:index_select(1, {0, 9}) end, "index_select: index 9 out of range for dim 1 of size 3")
  T.raises(function() return a:index_select(0, {{0}}) end, "bad argument #2 to 'tensor:index_select' (has shape [1,1], expected a 1-D index)")
  T.raises(function() return a:embedding({5}) end, "embedding: index 5 out of range for dim 0 of size 2")
  T.raises(function() return a:linear(t {{1, 2}}) end, "bad argument #1 to 'tensor:linear' (has shape [1,2], expected [*,3])")
  T.raises(function() return a:linear(t {{1, 2, 3}}, t {1, 2}) end, "bad argument #2 to 'tensor:linear' (has shape [2], expected [1])")
  T.raises(function() return mech.cat({a, t {1, 2}}, 0) end, "bad argument #1 to 'mech.cat' (element 2 has shape [2], expected the shape [2,3] of element 1 except at dim 0)")
  T.raises(function() return mech.stack({a, t {1, 2}}) end, "bad argument #1 to 'mech.stack' (element 2 has shape [2] (float32), expected [2,3] (float32) as element 1)")
  T.raises(function() return a:split(1, 4) end, "bad argument #2 to 'tensor:split' (expected a dimension in [-2, 1], got 4)")
  T.raises(function() return a:scatter_add(0, {{0}}, mech.zeros(1, 1, {dtype = "int32"})) end,
    "bad argument #3 to 'tensor:scatter_add' (expected a float32 tensor (as argument 1), got int32)")
  T.raises(function() return mech.where(t {1, 0}, a, a) end, "where: shapes")
  T.raises(function() return mech.zeros(2, 0):max(1) end, "calling 'tensor:max' on bad self (has an empty dimension to reduce (0 elements), expected at least one)")
end)

T.test("closed tensors are reported, not used", function()
  local a = t {1, 2}
  do
    local c <close> = t {3, 4}
    a = c -- keep a handle past the close
  end
  T.raises(function() return a + 1 end, "bad argument #1 to 'mech.add' (is a tensor that was closed)")
  T.raises(function() return mech.exp(a) end, "bad argument #1 to 'mech.exp' (is a tensor that was closed)")
  T.raises(function() return mech.cat({t {1}, a}) end, "bad argument #1 to 'mech.cat' (element 2 expected a tensor, got userdata)")
end)

T.test("odd arguments to every op raise errors, never crash", function()
  local names = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "fmod", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge",
    "neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "gelu", "silu", "softplus", "sin", "cos",
    "sum", "mean", "max", "min", "argmax", "argmin", "var", "clamp", "allclose", "matmul", "linear", "softmax",
    "log_softmax", "gather", "index_select", "scatter_add", "embedding", "cat", "stack", "split", "where",
    "std", "norm", "cumsum", "sort", "argsort", "topk", "flatten", "einsum"}
  local closed = t {1}
  do local c <close> = t {2}; closed = c end
  local values = table.pack(nil, 0, -1, 7, 1e300, 0 / 0, "s", true, {}, {{}}, {1, 2}, {{1}, {2, 3}}, print,
    mech.zeros(0), mech.zeros(2, 0), mech.tensor(3), mech.zeros(2, 3), mech.zeros(2, 3, {dtype = "int32"}),
    mech.zeros(3, 3):transpose(), mech.zeros(1, 1, 1, 1, 1, 1, 1, 1), closed)
  local calls, errors = 0, 0
  for _, name in ipairs(names) do
    local f = mech[name]
    T.eq(type(f), "function", name)
    for i = 1, values.n + 1 do
      for j = 1, values.n + 1, 3 do
        for k = 1, values.n + 1, 5 do
          calls = calls + 1
          local ok, err = pcall(f, values[i], values[j], values[k], values[k])
          if not ok then
            errors = errors + 1
            T.eq(type(err), "string", name)
          end
        end
      end
    end
  end
  T.truthy(calls > 10000 and errors > 0 and errors < calls, "some calls fail, some succeed: " .. calls)
end)

T.done()
