-- mech.nn layers: each forward against the functional form or an independent computation,
-- gradient checks of Lua modules, hooks on trees of layers (the built-in mixers' internal sites
-- included), and the errors of bad input.
local T = require "check"
local nn = mech.nn

local function maxdiff(a, b) return (a - b):abs():max():item() end
local function close(a, b, tol, msg)
  T.eq(a:shape(), b:shape(), msg)
  local d = maxdiff(a, b)
  T.truthy(d <= (tol or 1e-6), (msg or "") .. " differs by " .. d)
end

mech.manual_seed(7)

T.test("Linear: x·Wᵀ + b, by matmul; without bias", function()
  local lin = nn.Linear(5, 3)
  local x = mech.randn(2, 4, 5)
  close(lin(x), mech.matmul(x, lin.weight:transpose(0, 1)) + lin.bias, 1e-5)
  T.eq(lin.weight:shape(), {3, 5})
  local nb = nn.Linear(5, 3, {bias = false})
  T.eq(#nb:parameters(), 1)
  close(nb(x), mech.matmul(x, nb.weight:transpose(0, 1)), 1e-5)
  T.truthy(lin.weight:abs():max():item() <= 1 / math.sqrt(5)) -- PyTorch's default bound
end)

T.test("Embedding: the rows at the ids", function()
  local e = nn.Embedding(10, 4)
  local ids = mech.tensor({{1, 3}, {9, 0}}, {dtype = "int32"})
  local y = e(ids)
  T.eq(y:shape(), {2, 2, 4})
  close(y:select(0, 1):select(0, 0), e.weight:select(0, 9), 0)
end)

T.test("LayerNorm and RMSNorm: computed independently from mean and variance", function()
  local x = mech.randn(2, 3, 6)
  local ln = nn.LayerNorm(6)
  mech.no_grad(function() ln.weight:copy_(mech.randn(6)); ln.bias:copy_(mech.randn(6)) end)
  local mu = x:mean(2, true)
  local var = ((x - mu) * (x - mu)):mean(2, true)
  close(ln(x), (x - mu) / mech.sqrt(var + 1e-5) * ln.weight + ln.bias, 1e-5, "LayerNorm")
  local rms = nn.RMSNorm(6)
  mech.no_grad(function() rms.weight:copy_(mech.randn(6)) end)
  close(rms(x), x / mech.sqrt((x * x):mean(2, true) + 1e-5) * rms.weight, 1e-5, "RMSNorm")
  T.eq(#nn.LayerNorm(6, {bias = false}):parameters(), 1)
end)

T.test("Conv1d: causal and depthwise, against the sum over the window", function()
  local D, K, L = 3, 4, 7
  local conv = nn.Conv1d(D, K)
  T.eq(conv.weight:shape(), {D, 1, K})
  local x = mech.randn(1, L, D)
  local y = conv(x)
  local w, b = conv.weight:tolist(), conv.bias:tolist()
  local xs = x:tolist()[1]
  for t = 1, L do
    for d = 1, D do
      local s = b[d]
      for k = 1, K do
        local src = t - K + k
        if src >= 1 then s = s + w[d][1][k] * xs[src][d] end
      end
      T.near(y:get(0, t - 1, d - 1), s, 1e-5)
    end
  end
end)

T.test("MLP and GLU: as src/nn/mlp.c composes them", function()
  local x = mech.randn(2, 3, 4)
  local m = nn.MLP {d_model = 4}
  T.eq(m.fc1.weight:shape(), {16, 4})
  close(m(x), m.fc2(mech.gelu(m.fc1(x))), 0, "MLP")
  local g = nn.MLP {d_model = 4, kind = "glu"}
  close(g(x), g.fc3(g.fc1(x) * mech.gelu(g.fc2(x))), 0, "GLU")
  local names = {}
  for _, np in ipairs(g:named_parameters()) do names[#names + 1] = np[1] end
  T.eq(names, {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"})
end)

T.test("Sequential runs in order; ModuleList indexes from 0", function()
  local a, b = nn.Linear(4, 5), nn.Linear(5, 2)
  local s = nn.Sequential(a, b)
  local x = mech.randn(3, 4)
  close(s(x), b(a(x)), 0)
  T.eq(#s, 2)
  T.eq(s[0], a)
  local list = nn.ModuleList {nn.Linear(2, 2), nn.Linear(2, 2)}
  list:append(nn.Linear(2, 3))
  T.eq(#list, 3)
  T.eq(list[2].out_features, 3)
  T.eq(list[2]:path(), "2")
  T.eq(list:named_parameters()[5][1], "2.weight")
  T.raises(function() list(x) end, "ModuleList holds modules")
end)

T.test("Block: LN → mixer → residual → LN → MLP → residual, by hand; state_mixer none adds LN2(r)", function()
  local D = 8
  local blk = nn.Block {d_model = D, mixer = nn.Attention {d_model = D}}
  local x = mech.randn(2, 5, D)
  local r = x + blk.mixer(blk.norm1(x))
  close(blk(x), r + blk.mlp(blk.norm2(r)), 1e-6)
  local none = nn.Block {d_model = D, mixer = nn.Attention {d_model = D}, state_mixer = "none"}
  local r2 = x + none.mixer(none.norm1(x))
  close(none(x), r2 + none.norm2(r2), 1e-6)
  T.falsy(none.mlp)
  local mb = nn.Block {d_model = D, mixer = nn.Mamba {d_model = D}}
  close(mb(x), x + mb.mixer(mb.norm(x)), 1e-6)
end)

T.test("a built-in mixer layer equals the built-in model's mixer given the same weights", function()
  local D = 8
  local model = mech.model {arch = "delta_net", d_model = D, n_layers = 1, vocab = 16, seed = 3}
  local layer = nn.DeltaNet {d_model = D}
  local sd = {}
  for _, np in ipairs(model:named_parameters()) do
    local rel = np[1]:match("^backbone%.layers%.0%.sequence_mixer%.(.*)$")
    if rel then sd[rel] = np[2] end
  end
  layer:load_state_dict(sd)
  local tokens = mech.tensor({{1, 2, 3, 4, 5}}, {dtype = "int32"})
  local _, cache = model:run_with_cache(tokens, {names = {"blocks.0.attention_input", "blocks.0.attention_output"}})
  close(layer(cache["blocks.0.attention_input"]), cache["blocks.0.attention_output"], 1e-6)
  -- its parameters are leaves with gradients, which an optimizer updates
  layer(mech.randn(1, 4, D)):sum():backward()
  local opt = mech.optim.sgd(layer, {lr = 0.1})
  local before = layer:get_parameter("q_proj.weight"):clone()
  opt:step()
  T.truthy(maxdiff(before, layer:get_parameter("q_proj.weight")) > 0)
  T.raises(function() layer:set_parameter("q_proj.weight", mech.zeros(D, D)) end, "lives in the layer's built-in model")
end)

T.test("gradcheck: a module written in Lua, through its parameters and input", function()
  local Gate = nn.Module:extend("TestNNGate")
  function Gate:init(d)
    self.proj = nn.Linear(d, d)
    self.norm = nn.RMSNorm(d)
    self.w = self:param("w", {d}, {init = {normal = 1}})
  end
  function Gate:forward(x) return mech.sigmoid(self.proj(self.norm(x))) * self.w * x end
  local g = Gate(3)
  local x = mech.randn(2, 2, 3, {requires_grad = true})
  local names = {"proj.weight", "proj.bias", "norm.weight", "w"}
  local inputs = {x}
  for _, n in ipairs(names) do inputs[#inputs + 1] = g:get_parameter(n) end
  local ok = mech.gradcheck(function(xx, ...)
    for i, t in ipairs({...}) do g:set_parameter(names[i], t) end
    return g(xx)
  end, inputs, {eps = 1e-3, atol = 3e-3, rtol = 2e-2})
  T.eq(ok, true)
  -- a wrong gradient is caught: a forward whose backward is cut
  local bad = mech.gradcheck(function(xx) return xx:detach() * xx end, {mech.randn(3, {requires_grad = true})},
    {eps = 1e-3, atol = 3e-3, rtol = 2e-2})
  T.truthy(bad ~= true)
end)

T.test("hooks on a tree of layers: the built-in mixer's internal sites under its path", function()
  local D = 8
  local Net = nn.Module:extend("TestNNNet")
  function Net:init()
    self.blocks = nn.ModuleList {nn.Block {d_model = D, mixer = nn.Attention {d_model = D}},
      nn.Block {d_model = D, mixer = nn.Attention {d_model = D}}}
  end
  function Net:forward(x) return self.blocks[1](self.blocks[0](x)) end
  local net = Net()
  local names = net:hook_names()
  local set = {}
  for _, n in ipairs(names) do set[n] = true end
  for _, n in ipairs {"blocks.0.block_input", "blocks.1.mixer.pattern", "blocks.1.mixer.q", "blocks.0.mlp.hidden_post",
    "blocks.1.attention_output", "blocks.0.mixer"} do
    T.truthy(set[n], n)
  end
  local x = mech.randn(1, 4, D)
  local out, cache = net:run_with_cache(x, {names = "pattern"})
  T.eq(cache["blocks.0.mixer.pattern"]:shape(), {1, 1, 4, 4})
  T.truthy(cache["blocks.1.mixer.pattern"])
  T.falsy(cache["blocks.1.mixer.q"])
  -- a uniform causal pattern replaces the softmax's: the output changes, and matches a
  -- second run with the same replacement
  local uni = mech.tensor({{{{1, 0, 0, 0}, {0.5, 0.5, 0, 0}, {1 / 3, 1 / 3, 1 / 3, 0}, {0.25, 0.25, 0.25, 0.25}}}})
  local hooked = net:run_with_hooks(x, {fwd_hooks = {{"blocks.0.mixer.pattern", function() return uni end}}})
  T.truthy(maxdiff(hooked, out) > 1e-6)
  local again = net:run_with_hooks(x, {fwd_hooks = {{"blocks.0.mixer.pattern", function() return uni end}}})
  close(again, hooked, 0)
  close(net(x), out, 0) -- no hook left behind
  T.raises(function()
    net:run_with_hooks(x, {fwd_hooks = {{"blocks.0.mixer.q", function() return mech.zeros(2) end}}})
  end, "hook at blocks.0.mixer.q returned")
  T.raises(function()
    net:run_with_hooks(x, {fwd_hooks = {{"blocks.0.mixer.k", function() error("boom in a hook") end}}})
  end, "boom in a hook")
  close(net(x), out, 0)
end)

T.test("cross_entropy: the fused loss equals log-softmax at the kept rows, with its gradient", function()
  local logits = mech.randn(2, 3, 10, {requires_grad = true})
  local targets = mech.tensor({{1, -100, 3}, {9, 0, -100}}, {dtype = "int32"})
  local flat = logits:reshape(6, 10):index_select(0, mech.tensor({0, 2, 3, 4}, {dtype = "int32"}))
  local want = -(mech.log_softmax(flat, 1):gather(1, mech.tensor({{1}, {3}, {9}, {0}}, {dtype = "int32"}))):mean()
  T.near(nn.cross_entropy(logits, targets):item(), want:item(), 1e-5)
  T.eq(mech.gradcheck(function(x) return nn.cross_entropy(x, targets) end, {logits}, {eps = 1e-3, atol = 3e-3, rtol = 2e-2}), true)
  T.raises(function() nn.cross_entropy(mech.randn(2, 5), {1, 7}) end, "target 7 at row 1 out of range for 5 classes")
  T.raises(function() nn.cross_entropy(mech.randn(2, 5), mech.randn(2)) end, "expected an int32 tensor")
end)

T.test("contexts' wants reach a built-in mixer: filtered caches equal the built-in model's; errors in wants surface", function()
  local D = 8
  local model = mech.model {arch = "mamba", d_model = D, n_layers = 1, vocab = 16, seed = 2}
  local layer = nn.Mamba {d_model = D}
  local sd = {}
  for _, np in ipairs(model:named_parameters()) do
    local rel = np[1]:match("^backbone%.layers%.0%.sequence_mixer%.(.*)$")
    if rel then sd[rel] = np[2] end
  end
  layer:load_state_dict(sd)
  local tokens = mech.tensor({{1, 2, 3, 4, 5, 6}}, {dtype = "int32"})
  for _, site in ipairs {"ssm_state", "y", "dt"} do
    local _, c = model:run_with_cache(tokens, {names = {"blocks.0.attention_input", "blocks.0.mixer." .. site}})
    local out, lc = layer:run_with_cache(c["blocks.0.attention_input"], {names = {site}})
    local n = 0
    for _ in pairs(lc) do n = n + 1 end
    T.eq(n, 1, site)
    close(lc[site], c["blocks.0.mixer." .. site], 1e-6, site)
    close(out, layer(c["blocks.0.attention_input"]), 1e-6, site)
  end
  local asked = {}
  nn.push_context({fire = function(_, t) return t end, wants = function(p) asked[#asked + 1] = p; return false end})
  layer(mech.randn(1, 3, D))
  nn.pop_context()
  T.truthy(#asked > 0, "the mixer asked which sites are wanted")
  nn.push_context({fire = function(_, t) return t end, wants = function() error("wants failed") end})
  local ok, err = pcall(layer, mech.randn(1, 3, D))
  nn.pop_context()
  T.falsy(ok)
  T.truthy(tostring(err):find("wants failed"), tostring(err))
end)

T.test("help: a layer shows its class's entry, a module of your own the topic", function()
  local help = require "mech.help"
  T.truthy(help.text(nn.Linear(2, 2)):find("mech.nn.Linear(in_features", 1, true))
  T.truthy(help.text(nn.Mamba {d_model = 4}):find("mech.nn.Mamba{", 1, true))
  local Mine = nn.Module:extend("TestNNMine")
  T.truthy(help.text(Mine()):find("Layers and modules", 1, true))
end)

T.test("bad input: errors name the module path and what was expected", function()
  T.raises(function() nn.Linear(0, 3) end, "mech.nn.Linear: argument 1 (in_features) expected an integer >= 1, got 0")
  T.raises(function() nn.Linear(3, 3, {bias = true, baz = 1}) end, "unknown option 'baz'")
  T.raises(function() nn.MLP {d_model = 4, kind = "none"} end, "state_mixer = \"none\"")
  T.raises(function() nn.Block {d_model = 4, mixer = 3} end, "option mixer expected a module")
  T.raises(function() nn.Mamba {d_model = 8, n_heads = 2} end, "mech.nn.Mamba:")
  T.raises(function() nn.Attention {d_model = 8, vocab = 5} end, "belongs to the language model")
  T.raises(function() nn.Attention {d_model = 8, layer = -1} end, "option layer expected a block index")
  T.raises(function() nn.Attention {d_model = 8}(mech.randn(1, 3, 5)) end, "expected a float32 tensor of shape [B,L,8]")
  -- a module with no forward, deep in a tree: its path
  local Empty = nn.Module:extend("TestNNEmpty")
  local blk = nn.Block {d_model = 4, mixer = Empty()}
  T.raises(function() blk(mech.randn(1, 2, 4)) end, "mixer (TestNNEmpty) has no forward")
  -- a parameter registered twice
  local Twice = nn.Module:extend("TestNNTwice")
  function Twice:init() self.a = self:param("a", 2); self.b = self:param("a", 2) end
  T.raises(function() Twice() end, "parameter 'a' registered twice")
  -- a hook name that collides: a field that would be the path of a grandchild, a module at two paths
  local b2 = nn.Block {d_model = 4, mixer = nn.Attention {d_model = 4}}
  T.raises(function() b2:add_module("mixer.q", nn.HookPoint()) end, "a dot would collide")
  T.raises(function() nn.Sequential(b2.norm1) end, "already sits at norm1")
  -- load_state_dict into a differently shaped tree
  local small = nn.Block {d_model = 4, mixer = nn.Attention {d_model = 4}}
  local big = nn.Block {d_model = 8, mixer = nn.Attention {d_model = 8}}
  T.raises(function() small:load_state_dict(big:state_dict()) end,
    "'norm1.weight' (the parameter at norm1.weight) expected a tensor of shape [4], got shape [8]")
  local mamba = nn.Block {d_model = 4, mixer = nn.Mamba {d_model = 4}}
  T.raises(function() mamba:load_state_dict(small:state_dict()) end, "missing 'norm.weight'")
end)

T.done()
