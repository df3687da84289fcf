-- Zero-element tensors with huge sizes (docs/security.md's "the zero-size huge tensor"): a 1 KB
-- safetensors file can describe [2^31, 0, 2^31], which holds nothing. Every operation and
-- printing must answer at once (a loop over the non-zero sizes would run for minutes), and a
-- shape whose non-zero sizes multiply beyond 2^62 is refused by the loader and the constructors
-- with a message naming the function and the argument. Run alone: `mechlab
-- tests/lua/test_hostile_tensor.lua [case-substring]` runs the cases whose names contain it.
local T = require "check"
local only = arg and arg[1]
local function case(name, fn) if not only or name:find(only, 1, true) then T.test(name, fn) end end

local G = 2 ^ 31 // 1 -- 2147483648, an integer
local tmp = os.tmpname()

-- A safetensors file of one F32 tensor "x" with the given shape (JSON text) and no data bytes.
local function write_empty_file(path, shape)
  local header = '{"x":{"dtype":"F32","shape":' .. shape .. ',"data_offsets":[0,0]}}'
  header = header .. string.rep(" ", (8 - #header % 8) % 8)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack("<I8", #header), header)
  f:close()
end

local function hostile()
  write_empty_file(tmp, string.format("[%d,0,%d]", G, G))
  return mech.load_tensors(tmp).x
end

local function empty_of(t, shape)
  T.truthy(mech.is_tensor(t), "a tensor")
  T.eq(t:shape(), shape)
  T.eq(t:numel(), 0)
end

case("the 1 KB file loads as [2^31, 0, 2^31]", function()
  local t = hostile()
  local f = assert(io.open(tmp, "rb"))
  T.truthy(#f:read("a") < 1024, "the file is under 1 KB")
  f:close()
  empty_of(t, { G, 0, G })
end)

case("printing shows [] with the shape in the header", function()
  local t = hostile()
  local s = tostring(t)
  T.truthy(s:find("tensor(shape=[2147483648,0,2147483648], dtype=float32)", 1, true), s)
  T.truthy(s:find("\n[]", 1, true), s)
  T.eq(tostring(mech.zeros(2, 0, 3)):match("\n(.*)$"), "[]")
  T.eq(tostring(mech.zeros(0)):match("\n(.*)$"), "[]")
end)

case("copies and views", function()
  local t = hostile()
  empty_of(t:contiguous(), { G, 0, G })
  empty_of(t:transpose(0, 2):contiguous(), { G, 0, G })
  empty_of(t:permute(2, 0, 1):contiguous(), { G, G, 0 })
  empty_of(t:clone(), { G, 0, G })
  empty_of(t:int(), { G, 0, G })
  empty_of(t:int():float(), { G, 0, G })
  empty_of(t:reshape(0, G), { 0, G })
  empty_of(t:view(G, 0), { G, 0 })
  empty_of(t:flatten(), { 0 })
  empty_of(t:narrow(0, 1, 5), { 5, 0, G })
  empty_of(t:select(2, 7), { G, 0 })
  empty_of(t:unsqueeze(1):squeeze(1), { G, 0, G })
  empty_of(t:expand(1, G, 0, G):contiguous(), { 1, G, 0, G })
  empty_of(mech.zeros(G, 0, 4):expand(4, G, 0, 4):contiguous(), { 4, G, 0, 4 })
  empty_of(t:detach(), { G, 0, G })
  t:fill_(3)
  t:copy_(t:transpose(0, 2))
  T.truthy(t:equal(t:clone()))
  T.truthy(mech.allclose(t, t:contiguous()))
  T.raises(function() t:tolist() end, "tolist: the tensor of shape [2147483648,0,2147483648] has no element")
  T.eq(mech.zeros(2, 0):tolist(), { {}, {} })
end)

case("elementwise and broadcast", function()
  local t = hostile()
  empty_of(t + 1, { G, 0, G })
  empty_of(1 - t, { G, 0, G })
  empty_of(t * t, { G, 0, G })
  empty_of(t / mech.ones(1, 1, 1), { G, 0, G })
  empty_of(t ^ 2, { G, 0, G })
  empty_of(t + mech.zeros(0, 1), { G, 0, G })
  empty_of(-t, { G, 0, G })
  for _, f in ipairs { "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "silu", "softplus", "sin", "cos" } do
    empty_of(t[f](t), { G, 0, G })
  end
  empty_of(t % 2, { G, 0, G })
  empty_of(3 // t, { G, 0, G })
  for _, f in ipairs { "maximum", "minimum", "remainder", "fmod", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge" } do
    empty_of(t[f](t, t), { G, 0, G })
  end
  empty_of(t:clamp(0, 1), { G, 0, G })
  empty_of(mech.where(t:gt(0), t, 1), { G, 0, G })
  empty_of(mech.zeros(2 ^ 36 // 1, 0) + 1, { 2 ^ 36 // 1, 0 })
  empty_of(mech.zeros(0, 2 ^ 36 // 1) * mech.zeros(1, 1), { 0, 2 ^ 36 // 1 })
end)

case("reductions: empty along the rest, identity or error along the empty dim", function()
  local t = hostile()
  T.eq(t:sum():item(), 0)
  empty_of(t:sum(0), { 0, G })
  empty_of(t:sum(2), { G, 0 })
  empty_of(t:mean(0), { 0, G })
  empty_of(t:max(0), { 0, G })
  empty_of(t:min(2), { G, 0 })
  empty_of(t:argmax(0), { 0, G })
  empty_of(t:argmin(2), { G, 0 })
  empty_of(t:var(0), { 0, G })
  empty_of(t:std(2), { G, 0 })
  empty_of(t:sum(0, true), { 1, 0, G })
  -- reducing the empty dim: the output has every other size, 2^62 elements here
  T.raises(function() t:sum(1) end, "too large")
  -- and with small other sizes, as PyTorch: sum 0, max an error
  local e = mech.zeros(2, 0, 3)
  T.eq(e:sum(1):tolist(), { { 0, 0, 0 }, { 0, 0, 0 } })
  T.eq(mech.zeros(0):sum():item(), 0)
  T.raises(function() e:max(1) end, "max")
  T.raises(function() e:argmax(1) end, "argmax")
  T.raises(function() mech.zeros(0):max() end, "max")
end)

case("softmax, log_softmax, cumsum, sort, topk along every dim", function()
  local t = hostile()
  for d = 0, 2 do
    empty_of(t:softmax(d), { G, 0, G })
    empty_of(t:log_softmax(d), { G, 0, G })
    empty_of(t:cumsum(d), { G, 0, G })
  end
  empty_of(t:sort(1), { G, 0, G })
  empty_of(t:argsort(1), { G, 0, G })
  empty_of(mech.zeros(G, 0):sort(0), { G, 0 })
  empty_of((t:topk(0, 2)), { G, 0, 0 })
end)

case("the 0 last: rows of nothing along the other dims", function()
  local t = mech.zeros(G, 4, 0)
  empty_of(t:sum(1), { G, 0 })
  empty_of(t:max(1), { G, 0 })
  empty_of(t:argmin(1), { G, 0 })
  empty_of(t:var(1), { G, 0 })
  empty_of(t:norm(2, 1), { G, 0 })
  empty_of(t:softmax(1), { G, 4, 0 })
  empty_of(t:cumsum(1), { G, 4, 0 })
  empty_of(t:sort(1), { G, 4, 0 })
  empty_of((t:topk(2, 1)), { G, 2, 0 })
  empty_of(t:index_select(1, mech.tensor({ 0, 3 }, { dtype = "int32" })), { G, 2, 0 })
  empty_of(t:index_select(2, mech.zeros({ 0 }, { dtype = "int32" })), { G, 4, 0 })
  empty_of(mech.cat({ t, t }, 1), { G, 8, 0 })
  empty_of(t:transpose(0, 1):contiguous(), { 4, G, 0 })
end)

case("norms", function()
  local x = mech.zeros(G, 0, 4)
  empty_of(mech.layer_norm(x, mech.ones(4), mech.zeros(4)), { G, 0, 4 })
  empty_of(mech.rms_norm(x, mech.ones(4)), { G, 0, 4 })
  T.eq(x:norm(2):item(), 0)
  empty_of(x:norm(2, 2), { G, 0 })
end)

case("matmul, linear, einsum", function()
  local t = hostile()
  empty_of(t:matmul(mech.zeros(G, 0):reshape(G, 0)), { G, 0, 0 })
  empty_of(mech.zeros(G, 0, 5):matmul(mech.zeros(5, 3)), { G, 0, 3 })
  empty_of(mech.zeros(0, G):matmul(mech.zeros(G, 0)), { 0, 0 })
  T.eq(mech.zeros(2, 0):matmul(mech.zeros(0, 3)):tolist(), { { 0, 0, 0 }, { 0, 0, 0 } })
  empty_of(mech.zeros(G, 0, 4):linear(mech.zeros(3, 4), mech.zeros(3)), { G, 0, 3 })
  empty_of(mech.einsum("ijk->kji", t), { G, 0, G })
  empty_of(mech.einsum("bij,bjk->bik", mech.zeros(G, 0, 5), mech.zeros(G, 5, 0)), { G, 0, 0 })
  empty_of(mech.einsum("ij,jk->ik", mech.zeros(0, G), mech.zeros(G, 0)), { 0, 0 })
end)

case("conv", function()
  local x = mech.zeros(G, 0, 4)
  empty_of(mech.causal_conv1d(x, mech.zeros(4, 3), mech.zeros(4)), { G, 0, 4 })
  empty_of(mech.causal_conv1d(mech.zeros(0, G // 4, 4), mech.zeros(4, 3)), { 0, G // 4, 4 })
end)

case("indexing, joining, splitting", function()
  local t = hostile()
  local none = mech.zeros({ 0 }, { dtype = "int32" })
  empty_of(t:index_select(2, none), { G, 0, 0 })
  empty_of(t:index_select(0, mech.zeros({ 3 }, { dtype = "int32" })), { 3, 0, G })
  empty_of(t:gather(2, mech.zeros({ G, 0, 5 }, { dtype = "int32" })), { G, 0, 5 })
  empty_of(t:scatter_add(2, mech.zeros({ G, 0, 5 }, { dtype = "int32" }), mech.zeros(G, 0, 5)), { G, 0, G })
  empty_of(mech.zeros(5, 3):embedding(mech.zeros({ G, 0 }, { dtype = "int32" })), { G, 0, 3 })
  local u = mech.zeros(G, 0, 4)
  empty_of(mech.cat({ u, u }, 0), { 2 * G, 0, 4 })
  empty_of(mech.cat({ t, t }, 1), { G, 0, G })
  empty_of(mech.stack({ u, u }, 1), { G, 2, 0, 4 })
  T.raises(function() mech.cat({ t, t }, 0) end, "bad argument #1 to 'mech.cat' (size too large (shape [4294967296,0,2147483648]: the product of its non-zero sizes exceeds 2^62))")
  local parts = { t:split(G // 2, 0) }
  T.eq(#parts, 2)
  empty_of(parts[2], { G // 2, 0, G })
  empty_of(t[{ "1:", ":", 5 }], { G - 1, 0 })
end)

case("autograd through an empty tensor", function()
  local x = mech.zeros(G, 0, G, { requires_grad = true })
  local y = ((x * 2):softmax(1) + 1):sum()
  y:backward()
  empty_of(x.grad, { G, 0, G })
  local w = mech.zeros(G, 0, 4, { requires_grad = true })
  mech.layer_norm(w, mech.ones(4), mech.zeros(4)):cumsum(0):sum():backward()
  empty_of(w.grad, { G, 0, 4 })
end)

case("every built-in architecture over an empty batch of 2^30 documents", function()
  -- each mixer's kernels return at once for length 0 (on 77a2fba a loop over the batch's rows took
  -- about a minute per architecture); 2^30, as the kernels take the batch as an int
  local B = G // 2
  for _, arch in ipairs(mech.architectures) do
    local m = mech.model { arch = arch, d_model = 8, n_layers = 1, vocab = 16, pos_emb = false }
    empty_of(m:forward(mech.zeros({ B, 0 }, { dtype = "int32" })), { B, 0, 16 })
  end
end)

case("save and load round trip", function()
  local path = tmp .. ".rt"
  mech.save_tensors(path, { x = hostile() })
  empty_of(mech.load_tensors(path).x, { G, 0, G })
  os.remove(path)
end)

case("shapes whose non-zero sizes multiply beyond 2^62 are refused", function()
  local T40 = 2 ^ 40 // 1
  write_empty_file(tmp, string.format("[%d,0,%d]", T40, T40))
  T.raises(function() mech.load_tensors(tmp) end, "tensor 'x' has shape entry 2 of 1099511627776: the product of its non-zero sizes exceeds 2^62")
  write_empty_file(tmp, "[0,18446744073709551615]") -- above int64: never a negative size
  T.raises(function() mech.load_tensors(tmp) end, "tensor 'x' has shape entry 1 that is not a non-negative integer")
  write_empty_file(tmp, "[0,9223372036854775807,2]")
  T.raises(function() mech.load_tensors(tmp) end, "tensor 'x' has shape entry 1 of 9223372036854775807: the product")
  for _, ctor in ipairs { "zeros", "ones", "rand", "randn" } do
    T.raises(function() mech[ctor](T40, 0, T40) end, "mech." .. ctor .. ": argument 1: size too large")
    T.raises(function() mech[ctor]({ 2 ^ 62 // 1, 0, 2 }) end, "mech." .. ctor .. ": argument 1: size too large")
  end
  T.raises(function() mech.full({ T40, 0, T40 }, 1) end, "bad argument #1 to 'mech.full' (size too large (shape [1099511627776,0,1099511627776]: the product of its non-zero sizes exceeds 2^62))")
  T.raises(function() mech.randint(0, 5, T40, 0, T40) end, "bad argument #3 to 'mech.randint' (size too large (shape [1099511627776,0,1099511627776]: the product of its non-zero sizes exceeds 2^62))")
  T.raises(function() hostile():expand(T40, G, 0, G) end, "expand")
  T.raises(function() hostile():view(T40, T40, 0) end, "view")
  -- the place of the 0 does not matter: both are empty and allowed
  empty_of(mech.zeros(G, G, 0), { G, G, 0 })
  empty_of(mech.zeros(0, G, G), { 0, G, G })
end)

-- Option tables are read once per key (docs/ARCHITECTURE.md, "Option tables"): an __index
-- that answers a value and then nil made mlL_options pass NULL to strcmp (a segfault).
local function alternating(first)
  local reads = 0
  return setmetatable({}, { __index = function()
    reads = reads + 1
    if reads % 2 == 1 then return first end
  end }), function() return reads end
end

case("option tables whose __index answers differently on each read", function()
  for _, ctor in ipairs { "zeros", "ones" } do
    local opts, reads = alternating("float32")
    T.eq(mech[ctor](2, 3, opts):dtype(), "float32")
    T.eq(reads(), 2, "dtype and requires_grad, one read each")
  end
  for _, ctor in ipairs { "rand", "randn" } do -- dtype, requires_grad, then generator: "float32" again
    local opts, reads = alternating("float32")
    T.raises(function() mech[ctor](2, 3, opts) end, "mech." .. ctor .. ": option 'generator': expected a mech.Generator, got string")
    T.eq(reads(), 3)
  end
  local opts = alternating("int32")
  T.eq(mech.zeros(2, opts):dtype(), "int32")
  opts = alternating("nonsense")
  T.raises(function() mech.zeros(2, opts) end, "bad argument #2 to 'mech.zeros' (option 'dtype': expected 'float32' or 'int32', got 'nonsense')")
  opts = alternating(7)
  T.raises(function() mech.full({ 2 }, 1, opts) end, "bad argument #3 to 'mech.full' (option 'dtype': expected a string, got 7)")
  -- a string made by __index stays alive after the read (anchored to the table)
  local made = setmetatable({}, { __index = function(_, k) if k == "profile" then return ("sh" .. "ort") end end })
  local before = mech.get_printoptions()
  mech.set_printoptions(made)
  collectgarbage()
  T.eq(mech.get_printoptions().edgeitems, 2)
  mech.set_printoptions(before)
end)

case("option tables whose metamethods raise", function()
  local boom = setmetatable({}, { __index = function(_, k) error("no option " .. k) end })
  T.raises(function() mech.zeros(2, boom) end, "no option dtype")
  T.raises(function() mech.randn(2, boom) end, "no option dtype")
  local pairs_boom = setmetatable({}, { __pairs = function() error("pairs") end })
  T.eq(mech.zeros(2, pairs_boom):shape(), { 2 }) -- the key check walks the table's own keys
  local defaults = setmetatable({}, { __index = { dtype = "int32" } })
  T.eq(mech.zeros(2, defaults):dtype(), "int32") -- defaults behind __index are honoured
  local len = 0
  local shape = setmetatable({}, { __len = function() len = len + 1; return len == 1 and 2 or 9 end,
    __index = function(_, i) return 3 end })
  T.eq(mech.zeros(shape):shape(), { 3, 3 })
end)

os.remove(tmp)
T.done()
