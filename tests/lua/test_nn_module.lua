-- mech.nn.Module: classes, parameters, children and paths, state dicts, hook contexts and the
-- hooks of Lua trees, printing, and the errors of bad input.
local T = require "check"
local nn = mech.nn

-- A small Linear written here, so this file tests the base class alone.
local Lin = nn.Module:extend("TestLin")
function Lin:init(i, o)
  self.weight = self:param("weight", {o, i}, {init = "linear_weight"})
  self.bias = self:param("bias", {o}, {init = "linear_bias", fan = i})
end
function Lin:forward(x) return mech.linear(x, self.weight, self.bias) end

local Gate = nn.Module:extend("TestGate")
function Gate:init(opts)
  self.proj = Lin(opts.d_model, opts.d_model)
  self.w = self:param("w", {opts.d_model}, {init = "ones"})
  self.hook_gate = nn.HookPoint()
end
function Gate:forward(x) return self.hook_gate(self.proj(x)):sigmoid() * self.w end

local Two = nn.Module:extend("TestTwo")
function Two:init(d)
  self.a = Gate{d_model = d}
  self:add_module("b", Gate{d_model = d}, "second")
end
function Two:forward(x) return self.b(self.a(x)) end

local function maxdiff(a, b) return (a - b):abs():max():item() end

T.test("mech.nn is reached lazily and is the same table as require", function()
  T.eq(mech.nn, require "mech.nn")
  T.truthy(nn.Module and nn.HookPoint and nn.push_context and nn.pop_context)
end)

T.test("a class's forward runs by calling the instance; init registers params and children", function()
  mech.manual_seed(1)
  local g = Gate{d_model = 8}
  local x = mech.randn(2, 5, 8)
  local y = g(x)
  T.eq(y:shape(), {2, 5, 8})
  local want = mech.sigmoid(mech.linear(x, g.proj.weight, g.proj.bias)) * g.w
  T.near(maxdiff(y, want), 0, 0)
  T.eq(g:num_params(), 8 * 8 + 8 + 8)
  T.eq(#g:children(), 2)
  T.eq(g:named_children()[1][1], "proj")
  T.eq(g:named_children()[2][1], "hook_gate")
end)

T.test("named_parameters in registration order with state prefixes; paths separate", function()
  local t = Two(4)
  local names = {}
  for _, np in ipairs(t:named_parameters()) do names[#names + 1] = np[1] end
  T.eq(names, {"a.proj.weight", "a.proj.bias", "a.w", "second.proj.weight", "second.proj.bias", "second.w"})
  T.eq(t:hook_names(), {"a", "a.proj", "a.hook_gate", "b", "b.proj", "b.hook_gate"})
  T.eq(t.b.proj:path(), "b.proj")
  -- a subtree names its parameters relative to itself
  T.eq(t.b:named_parameters()[1][1], "proj.weight")
  T.eq(#t:parameters(), 6)
  for _, p in ipairs(t:parameters()) do T.truthy(p.requires_grad) end
end)

T.test("param init kinds: bounds, ones/zeros, normal, uniform, function; specs report them", function()
  local C = nn.Module:extend("TestInits")
  function C:init()
    self:param("lw", {50, 16}, {init = "linear_weight"})
    self:param("cw", {8, 4}, {init = "conv_weight"})
    self:param("o", {3}, {init = "ones"})
    self:param("z", {3}, {init = "zeros"})
    self:param("n", {2000}, {init = {normal = 0.5}})
    self:param("u", {100}, {init = {uniform = {2, 3}}})
    self:param("f", {3}, {init = function(t) t:fill_(7) end})
  end
  local c = C()
  T.truthy(c:get_parameter("lw"):abs():max():item() <= 0.25)
  T.truthy(c:get_parameter("cw"):abs():max():item() <= 0.5)
  T.eq(c:get_parameter("o"):tolist(), {1, 1, 1})
  T.eq(c:get_parameter("z"):tolist(), {0, 0, 0})
  local sd = mech.std(c:get_parameter("n")):item()
  T.truthy(sd > 0.45 and sd < 0.55, "normal std " .. sd)
  local u = c:get_parameter("u")
  T.truthy(u:min():item() >= 2 and u:max():item() <= 3)
  T.eq(c:get_parameter("f"):tolist(), {7, 7, 7})
  local specs = c:param_specs()
  T.eq(specs[1].name, "lw")
  T.eq(specs[1].shape, {50, 16})
  T.eq(specs[1].init, "linear_weight")
  T.eq(specs[1].fan, 16)
  T.eq(specs[2].fan, 4)
end)

T.test("set_parameter replaces the tensor a field reads", function()
  local g = Gate{d_model = 3}
  local t = mech.full({3}, 2):requires_grad_()
  g:set_parameter("w", t)
  T.eq(g.w, t)
  T.eq(g:get_parameter("w"), t)
  g:set_parameter("proj.bias", mech.zeros(3):requires_grad_())
  T.eq(g.proj.bias:tolist(), {0, 0, 0})
  T.raises(function() g:set_parameter("w", mech.zeros(4)) end, "expected a float32 tensor of shape [3]")
  T.raises(function() g:set_parameter("ww", mech.zeros(3)) end, "did you mean 'w'")
end)

T.test("state_dict and load_state_dict round-trip; errors name the path and the shape", function()
  local a, b = Two(4), Two(4)
  b:load_state_dict(a:state_dict())
  local x = mech.randn(1, 3, 4)
  T.near(maxdiff(a(x), b(x)), 0, 0)
  local sd = a:state_dict()
  sd["second.w"] = mech.zeros(5)
  local before = b.b.w:tolist()
  T.raises(function() b:load_state_dict(sd) end, "'second.w' (the parameter at b.w) expected a tensor of shape [4], got shape [5]")
  T.eq(b.b.w:tolist(), before) -- nothing changed
  sd["second.w"] = nil
  T.raises(function() b:load_state_dict(sd) end, "missing 'second.w'")
  local sd2 = a:state_dict()
  sd2["second.ww"] = mech.zeros(4)
  T.raises(function() b:load_state_dict(sd2) end, "unexpected key 'second.ww'")
  -- into a differently shaped tree
  T.raises(function() Two(5):load_state_dict(a:state_dict()) end, "expected a tensor of shape [5,5], got shape [4,4]")
end)

T.test("gradients reach every parameter; zero_grad clears them", function()
  local t = Two(3)
  t(mech.randn(2, 2, 3)):sum():backward()
  for _, np in ipairs(t:named_parameters()) do T.truthy(np[2].grad, np[1] .. " has a grad") end
  t:zero_grad()
  for _, p in ipairs(t:parameters()) do T.truthy(not p.grad or p.grad:abs():sum():item() == 0) end
end)

T.test("train/eval set .training on the whole tree; apply visits children first", function()
  local t = Two(2)
  T.eq(t.training, true)
  t:eval()
  T.eq(t.a.proj.training, false)
  t:train()
  T.eq(t.b.hook_gate.training, true)
  local seen = {}
  t:apply(function(m) seen[#seen + 1] = m:path() end)
  T.eq(seen[#seen], "")
  T.eq(seen[1], "a.proj")
  T.eq(#t:modules(), 7)
end)

T.test("run_with_cache caches every site, or those the names filter keeps", function()
  local t = Two(4)
  local x = mech.randn(1, 2, 4)
  local out, cache = t:run_with_cache(x)
  for _, n in ipairs(t:hook_names()) do T.truthy(cache[n], n) end
  T.near(maxdiff(cache.b, out), 0, 0)
  T.near(maxdiff(cache["a.proj"], t.a.proj(x)), 0, 0)
  local _, c2 = t:run_with_cache(x, {names = "hook_gate"})
  local n = 0
  for k in pairs(c2) do n = n + 1; T.truthy(k:find("hook_gate"), k) end
  T.eq(n, 2)
end)

T.test("run_with_hooks replaces an activation; add_hook persists until reset", function()
  local t = Two(4)
  local x = mech.randn(1, 2, 4)
  local out = t:run_with_hooks(x, {fwd_hooks = {{"a", function(act) return act * 0 end}}})
  T.near(maxdiff(out, t.b(mech.zeros(1, 2, 4))), 0, 0)
  local calls = {}
  local h = t:add_hook("b.proj", function(act, name) calls[#calls + 1] = name end)
  t(x)
  T.eq(calls, {"b.proj"})
  h.remove()
  t(x)
  T.eq(#calls, 1)
  t:add_hook(function(name) return name:find("hook_gate") end, function(act, name) calls[#calls + 1] = name end)
  t(x)
  T.eq(calls, {"b.proj", "a.hook_gate", "b.hook_gate"})
  t:reset_hooks()
  t(x)
  T.eq(#calls, 3)
  T.raises(function() t:run_with_hooks(x, {fwd_hooks = {{"a", function() return mech.zeros(2) end}}}) end,
    "hook at a returned a float32 tensor of shape [2], expected a float32 tensor of shape [1,2,4]")
end)

T.test("hook contexts: the top one receives the sites; wants filters; pop restores", function()
  local t = Two(2)
  local seen = {}
  nn.push_context({fire = function(path, act) seen[#seen + 1] = path end, wants = function(p) return p:sub(1, 1) == "a" end})
  t(mech.randn(1, 1, 2))
  nn.pop_context()
  T.eq(seen, {"a.proj", "a.hook_gate", "a"})
  t(mech.randn(1, 1, 2))
  T.eq(#seen, 3)
  T.raises(function() nn.pop_context() end, "no hook context")
  T.raises(function() nn.push_context({}) end, "fire(path, tensor)")
end)

T.test("printing shows the tree with shapes and parameter counts", function()
  local s = tostring(Gate{d_model = 8})
  T.truthy(s:find("TestGate  %(80 parameters%)"), s)
  T.truthy(s:find("proj: TestLin  %(72 parameters%)"), s)
  T.truthy(s:find("weight %[8,8%]"), s)
  T.truthy(s:find("hook_gate: HookPoint"), s)
end)

T.test("bad input: no forward, a parameter twice, colliding names, a module at two paths", function()
  local NoFwd = nn.Module:extend("TestNoFwd")
  local P = nn.Module:extend("TestParent")
  function P:init() self.inner = NoFwd() end
  function P:forward(x) return self.inner(x) end
  T.raises(function() P()(mech.zeros(1)) end, "inner (TestNoFwd) has no forward")
  local Twice = nn.Module:extend("TestTwice")
  function Twice:init() self:param("w", {2}); self:param("w", {2}) end
  T.raises(function() Twice() end, "parameter 'w' registered twice")
  local g = Gate{d_model = 2}
  T.raises(function() g:add_module("w", nn.HookPoint()) end, "the name 'w' is taken")
  T.raises(function() g:param("proj", {2}) end, "collides with the child")
  T.raises(function() g:add_module("a.b", nn.HookPoint()) end, "a dot would collide")
  local shared = nn.HookPoint()
  local t = Two(2)
  t.a.extra = shared
  T.raises(function() t.b.extra = shared end, "already sits at a.extra")
  T.raises(function() g:param("v", {0}) end, "size 1 expected an integer >= 1")
  T.raises(function() g:param("v", {2}, {init = "bogus"}) end, "unknown init 'bogus'")
  T.raises(function() g:param("v", {2}, {init = "linear_bias"}) end, "needs option fan")
end)

T.done()
