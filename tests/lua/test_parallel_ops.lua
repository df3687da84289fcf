-- The ops that split their elements over ml_threads_for() threads (elementwise maps, norms,
-- running sums: src/core/threads.h) give the bits of one thread for any thread count, on every
-- layout the element loop handles: contiguous, broadcast, scalar operands, strided views, and
-- rows split between threads.
local T = require "check"

local function same(a, b) return a:dtype() == b:dtype() and ((a - b):abs():max():item() == 0) end

-- every case above the parallel threshold (32,768 elements), with odd sizes so that ranges split
-- rows in the middle
local gen = mech.Generator(7)
local x = mech.randn(33, 41, 29, { generator = gen }) -- 39,237 elements
local y = mech.randn(33, 41, 29, { generator = gen })
local row = mech.randn(1, 1, 29, { generator = gen })
local col = mech.randn(33, 41, 1, { generator = gen })
local ix = mech.randint(-50, 50, 33, 41, 29, { generator = gen })
local cases = {
  { "add (contiguous)", function() return x + y end },
  { "mul by a broadcast row", function() return x * row end },
  { "div by a broadcast column", function() return x / col end },
  { "sub of a number", function() return x - 0.25 end },
  { "pow of a transposed view", function() return mech.pow(x:transpose(0, 2):abs(), y:transpose(0, 2)) end },
  { "maximum of strided views", function() return mech.maximum(x:narrow(2, 1, 27), y:narrow(2, 0, 27)) end },
  { "comparison", function() return mech.lt(x, y) end },
  { "int32 arithmetic", function() return ix * ix - ix end },
  { "int32 remainder and floor division (one thread: they flag a zero divisor)", function() return ix % 7 + ix // 3 end },
  { "float remainder", function() return mech.remainder(x, col) end },
  { "exp", function() return mech.exp(x) end },
  { "log of |x|", function() return mech.log(x:abs()) end },
  { "sigmoid of a view", function() return mech.sigmoid(x:transpose(0, 1)) end },
  { "silu", function() return mech.silu(x) end },
  { "norm along the last dim", function() return mech.norm(x, 2, -1, true) end },
  { "norm along dim 1", function() return mech.norm(x, 3, 1) end },
  { "cumsum along dim 1", function() return mech.cumsum(x, 1) end },
  { "cumsum along the last dim", function() return mech.cumsum(x, 2) end },
}

T.test("every op gives the bits of one thread with 2, 3 and 5 threads", function()
  local old = mech.threads()
  for _, c in ipairs(cases) do
    mech.threads(1)
    local ref = c[2]()
    for _, n in ipairs { 2, 3, 5 } do
      mech.threads(n)
      T.truthy(same(c[2](), ref), c[1] .. " with " .. n .. " threads")
    end
  end
  mech.threads(old)
end)

T.test("the results are the ops' own: a few elements against Lua's arithmetic", function()
  mech.threads(3)
  local s, p = x + y, x * row
  for _, at in ipairs { { 0, 0, 0 }, { 16, 20, 14 }, { 32, 40, 28 } } do
    local a, b, r = x:get(at[1], at[2], at[3]), y:get(at[1], at[2], at[3]), row:get(0, 0, at[3])
    T.near(s:get(at[1], at[2], at[3]), a + b, 1e-6)
    T.near(p:get(at[1], at[2], at[3]), a * r, 1e-6)
  end
  local cs, acc = mech.cumsum(x, 1), 0
  for j = 0, 40 do acc = acc + x:get(32, j, 28) end
  T.near(cs:get(32, 40, 28), acc, 1e-4)
  mech.threads(1)
end)

T.done()
