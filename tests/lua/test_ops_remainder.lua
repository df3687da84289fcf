-- Tensor remainder, fmod and floor division (issue 43): values against Lua's own operators,
-- broadcasting, dtypes, division by zero (int32: an error; float32: IEEE), gradients by finite
-- differences away from the jumps, errors that name function and argument, empty tensors.
local T = require "check"

local function t(v, opts) return mech.tensor(v, opts) end
local function i32(v) return mech.tensor(v, {dtype = "int32"}) end
local function list(x) return x:tolist() end

-- The values are multiples of 1/4 (exact in float32 and double), so fmod, the quotients and the
-- remainders are exact in both and compare with T.eq.
local A = {-7.5, -5, -3.25, -1, -0.5, 0, 0.75, 2, 3.5, 6.25}
local B = {-2.5, -1, -0.75, 0.5, 1.25, 3}

local function outer(f)
  local rows = {}
  for i, x in ipairs(A) do
    rows[i] = {}
    for j, y in ipairs(B) do rows[i][j] = f(x, y) end
  end
  return rows
end

T.test("float32 values: % as Lua's (the divisor's sign), fmod as C's, // as floor", function()
  local a, b = t(A):reshape(#A, 1), t(B) -- broadcast to (10, 6)
  T.eq(list(mech.remainder(a, b)), outer(function(x, y) return x % y end))
  T.eq(list(mech.fmod(a, b)), outer(math.fmod))
  T.eq(list(mech.floor_divide(a, b)), outer(function(x, y) return math.floor(x / y) + 0.0 end))
  T.eq(list(a % b), list(mech.remainder(a, b)), "__mod")
  T.eq(list(a // b), list(mech.floor_divide(a, b)), "__idiv")
  T.eq(list(a:remainder(b)), list(mech.remainder(a, b)), "method")
  T.eq(list(a:fmod(b)), list(mech.fmod(a, b)), "method")
  T.eq(list(a:floor_divide(b)), list(mech.floor_divide(a, b)), "method")
  T.eq((a % b):dtype(), "float32")
  -- a quotient computed as floor(a / b) would say 10 here: 1 = 9 · 0.1 + 0.0999…
  T.eq((t {1} // 0.1):item(), 9.0)
  T.near((t {1} % 0.1):item(), 0.1, 1e-6)
  T.eq(list(t {-1, 1} % 1), {0, 0})
end)

T.test("numbers on either side, tables and broadcasting", function()
  local a = t {{5, -5}, {7.5, -7.5}}
  T.eq(list(a % 2), {{1, 1}, {1.5, 0.5}})
  T.eq(list(a // 2), {{2, -3}, {3, -4}})
  T.eq(list(10 % t {3, -3, 4}), {1, -2, 2})
  T.eq(list(10 // t {3, -3, 4}), {3, -4, 2})
  T.eq(list(mech.fmod(-10, t {3, -3})), {-1, -1})
  T.eq(list(mech.remainder(a, {2, -2})), {{1, -1}, {1.5, -1.5}})
  T.eq(list(mech.fmod({{5}, {-5}}, t {3, -3})), {{2, 2}, {-2, -2}})
  T.eq((t {{1}, {2}} % t {{{3, 4, 5}}}):shape(), {1, 2, 3})
  T.eq(mech.remainder(t(7), 4):item(), 3)
end)

T.test("int32: stays int32 (Lua's integer // and %, C's fmod), mixed gives float32", function()
  local a, b = {}, {}
  for x = -7, 7 do a[#a + 1] = x end
  for _, y in ipairs {-3, -2, -1, 1, 2, 3} do b[#b + 1] = y end
  local ai, bi = i32(a):reshape(#a, 1), i32(b)
  local function table_of(f)
    local rows = {}
    for i, x in ipairs(a) do
      rows[i] = {}
      for j, y in ipairs(b) do rows[i][j] = f(x, y) end
    end
    return rows
  end
  T.eq((ai % bi):dtype(), "int32")
  T.eq((ai // bi):dtype(), "int32")
  T.eq(mech.fmod(ai, bi):dtype(), "int32")
  T.eq(list(ai % bi), table_of(function(x, y) return x % y end))
  T.eq(list(ai // bi), table_of(function(x, y) return x // y end))
  T.eq(list(mech.fmod(ai, bi)), table_of(math.fmod))
  T.eq((ai % 2):dtype(), "int32", "an integral number keeps int32")
  T.eq((ai % 2.5):dtype(), "float32")
  T.eq((ai // t {2}):dtype(), "float32", "int32 with float32")
  T.eq(list(i32 {7, -7} // t {2}), {3, -4})
  -- INT32_MIN by -1 overflows in C: the quotient wraps (as int32 + and * do), the remainder is 0
  local min = i32 {-2147483648}
  T.eq(list(min // -1), {-2147483648})
  T.eq(list(min % -1), {0})
  T.eq(list(mech.fmod(min, -1)), {0})
  T.eq(list(min % 7), {math.tointeger(-2147483648 % 7)})
  T.eq(list(min // 7), {-2147483648 // 7})
  T.eq(list(mech.fmod(min, -7)), {math.fmod(-2147483648, -7)})
end)

T.test("int32 division by zero is an error naming the function; float32 follows IEEE", function()
  local a = i32 {{1, 2}, {3, 4}}
  for name, f in pairs {remainder = function(x, y) return x % y end, floor_divide = function(x, y) return x // y end,
                        fmod = mech.fmod} do
    T.raises(function() return f(a, 0) end, name .. ": integer division by zero")
    T.raises(function() return f(a, i32 {1, 0}) end, name .. ": integer division by zero", "a zero in a broadcast divisor")
    T.raises(function() return f(5, i32 {{3}, {0}}) end, name .. ": integer division by zero", "a number by a tensor")
    T.raises(function() return mech[name](a:transpose(), i32 {{2}, {0}}) end, name .. ": integer division by zero")
    T.eq(f(i32 {}, 0):shape(), {0}, "an empty int32 tensor divides nothing")
  end
  -- float32: nan for % and fmod by 0, ±inf or nan for //
  local x = t {1, -1, 0}
  for _, v in ipairs(list(x % 0)) do T.truthy(v ~= v, "remainder by 0 is nan") end
  for _, v in ipairs(list(mech.fmod(x, 0))) do T.truthy(v ~= v, "fmod by 0 is nan") end
  local q = list(x // 0)
  T.eq(q[1], math.huge)
  T.eq(q[2], -math.huge)
  T.truthy(q[3] ~= q[3])
  local v = (i32 {3} % t {0}):tolist()[1]
  T.truthy(v ~= v, "int32 by a float32 0 is nan, not an error")
  -- infinities: Python's and PyTorch's answers
  T.eq(list(t {-1, 1} % math.huge), {math.huge, 1})
  T.eq(list(t {-1, 1} // math.huge), {-1, 0})
  T.eq(list(mech.fmod(t {-1, 1}, math.huge)), {-1, 1})
end)

-- points a = b·(k + f) with f in [0.25, 0.75]: a quarter of |b| from the nearest jump
local function away_from_jumps(gen, n)
  local a, b = {}, {}
  for i = 1, n do
    local size = 0.5 + 1.5 * gen:uniform()
    b[i] = gen:uniform() < 0.5 and -size or size
    a[i] = b[i] * (math.floor(gen:uniform() * 7) - 3 + 0.25 + 0.5 * gen:uniform())
  end
  return a, b
end

T.test("gradients: finite differences away from the jumps; floor_divide's are zero", function()
  local gen = mech.Generator(43)
  local opts = {eps = 1e-3, atol = 3e-3, rtol = 2e-2}
  local a, b = away_from_jumps(gen, 12)
  local function leaves() return t(a):reshape(3, 4):requires_grad_(), t(b):reshape(3, 4):requires_grad_() end
  -- a number on either side, at points away from its jumps too: c / 1.5 and 2 / d are a's k + f
  -- and, for a (3, 4) by a row of 4, e's row r is the row times a's k + f
  local c, d, e = {}, {}, {}
  for i = 1, #a do
    c[i], d[i], e[i] = 1.5 * a[i] / b[i], 2 * b[i] / a[i], a[i] / b[i] * b[(i - 1) % 4 + 1]
  end
  for _, name in ipairs {"remainder", "fmod"} do
    local ok, err = mech.gradcheck(mech[name], {leaves()}, opts)
    T.truthy(ok, name .. ": " .. tostring(err))
    -- broadcast: b's gradient summed over a's rows
    local row = t {b[1], b[2], b[3], b[4]}:requires_grad_()
    ok, err = mech.gradcheck(mech[name], {t(e):reshape(3, 4):requires_grad_(), row}, opts)
    T.truthy(ok, name .. " broadcast: " .. tostring(err))
    ok, err = mech.gradcheck(function(u) return mech[name](u, 1.5) end, {t(c):requires_grad_()}, opts)
    T.truthy(ok, name .. " by a number: " .. tostring(err))
    ok, err = mech.gradcheck(function(v) return mech[name](2, v) end, {t(d):requires_grad_()}, opts)
    T.truthy(ok, name .. " of a number: " .. tostring(err))
  end
  -- the gradient's values: d/da = 1, d/db = −floor(a/b) (remainder) or −trunc(a/b) (fmod)
  local x, y = t({7, -7}, {requires_grad = true}), t({2, 2}, {requires_grad = true})
  mech.remainder(x, y):sum():backward()
  T.eq(list(x.grad), {1, 1})
  T.eq(list(y.grad), {-3, 4})
  x.grad, y.grad = nil, nil
  mech.fmod(x, y):sum():backward()
  T.eq(list(y.grad), {-3, 3})
  -- floor_divide is piecewise constant: the gradient is zero (not an error), as
  -- torch.div(rounding_mode = "floor")
  x.grad, y.grad = nil, nil
  local q = x // y
  T.truthy(q.requires_grad)
  local loss = (q * 3):sum() + x:sum()
  loss:backward()
  T.eq(list(x.grad), {1, 1})
  T.eq(list(y.grad), {0, 0})
  local ok, err = mech.gradcheck(mech.floor_divide, {leaves()}, opts)
  T.truthy(ok, "floor_divide: " .. tostring(err))
  -- int32 results never require grad
  T.falsy((i32 {7} % i32 {2}).requires_grad)
end)

T.test("bad arguments name the function, the argument, what was expected and what came", function()
  local a = t {1, 2, 3}
  T.raises(function() return mech.remainder("s", a) end,
    "bad argument #1 to 'mech.remainder' (a tensor, a number or a table of numbers expected, got 's')")
  T.raises(function() return mech.fmod(a, true) end, "bad argument #2 to 'mech.fmod' (a tensor, a number or a table of numbers expected, got boolean)")
  T.raises(function() return mech.floor_divide(a) end, "bad argument #2 to 'mech.floor_divide' (a tensor, a number or a table of numbers expected, got no value)")
  T.raises(function() return a % "2" end, "bad argument #2 to 'mech.remainder' (a tensor, a number or a table of numbers expected, got '2')")
  T.raises(function() return {} // a end, "floor_divide: ")
  T.raises(function() return a % t {1, 2} end, "remainder: shapes [3] and [2] do not broadcast")
  T.raises(function() return a:floor_divide(mech.zeros(2, 2)) end, "floor_divide: shapes [3] and [2,2] do not broadcast")
  T.raises(function() return mech.fmod(a, {{1, 2}, {3}}) end, "bad argument #2 to 'mech.fmod' (is not rectangular: a row at depth 1 has 1 entries, expected 2)")
  local closed = t {1}
  do local c <close> = t {2}; closed = c end
  T.raises(function() return closed % 2 end, "bad argument #1 to 'mech.remainder' (is a tensor that was closed)")
end)

T.test("empty tensors: results at once, whatever the other sizes", function()
  local G = 2 ^ 31 // 1
  local huge = mech.zeros(G, 0, G)
  for _, r in ipairs {huge % 2, 3 // huge, mech.fmod(huge, huge), huge % mech.ones(1, 1, 1), huge:floor_divide(huge)} do
    T.eq(r:shape(), {G, 0, G})
  end
  local hi = mech.zeros(G, 0, G, {dtype = "int32"})
  T.eq((hi % 0):shape(), {G, 0, G})
  T.eq((hi // hi):dtype(), "int32")
  local g = mech.zeros(G, 0, G):requires_grad_()
  mech.remainder(g, 3):sum():backward()
  T.eq(g.grad:shape(), {G, 0, G})
end)

T.done()
