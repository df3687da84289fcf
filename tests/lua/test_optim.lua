-- mech.optim: AdamW and SGD as objects over tensors, models and modules; parameter groups,
-- state_dict, clip_grad_norm, schedules, and the errors of bad input.
local T = require "check"

local function leaf(v) return mech.tensor(v, {requires_grad = true}) end

local function tiny(seed)
  return mech.model {arch = "attention", d_model = 16, n_layers = 2, vocab = 20, max_pos = 64, seed = seed or 3}
end

local function toy_batch()
  local tokens = mech.tensor({{1, 5, 6, 7, 8, 2, 5, 0}, {1, 9, 10, 11, 12, 2, 11, 0}}, {dtype = "int32"})
  local targets = mech.full({2, 8}, -100, {dtype = "int32"})
  targets[{0, 6}] = 6
  targets[{1, 6}] = 12
  return tokens, targets
end

-- every parameter of a model as nested lists, for exact comparisons
local function weights(m)
  local out = {}
  for i, np in ipairs(m:named_parameters()) do out[i] = np[2]:tolist() end
  return out
end

T.test("AdamW over the model's tensors reproduces mech.adamw's train_step bit for bit", function()
  local a, b = tiny(), tiny()
  local tokens, targets = toy_batch()
  local builtin = mech.adamw(a, {weight_decay = 0.1, beta1 = 0.8, eps = 1e-6})
  local opt = mech.optim.adamw(b, {lr = 1e-2, weight_decay = 0.1, betas = {0.8, 0.999}, eps = 1e-6})
  T.eq(opt.n_params, #b:named_parameters())
  for step = 1, 4 do
    local lr = 1e-2 * step -- a schedule: each update its own lr
    a:train_step(builtin, tokens, targets, lr)
    b:zero_grad()
    local loss = b:loss(tokens, targets)
    loss:backward()
    opt:set_lr(lr)
    opt:step()
    T.eq(weights(b), weights(a), "step " .. step)
  end
  local sd = opt:state_dict()
  T.eq(sd.state[0].step, 4)
  -- the moments agree too: the builtin's are one flat vector in parameter order
  local flat = {}
  for i = 0, opt.n_params - 1 do
    for _, v in ipairs(sd.state[i].exp_avg:flatten():tolist()) do flat[#flat + 1] = v end
  end
  T.eq(flat, builtin.exp_avg:tolist())
end)

T.test("AdamW's first step by hand: lr * g / (|g| + eps), decoupled decay", function()
  local w = leaf {1, -2, 0.5}
  w.grad = mech.tensor {0.3, -4, 0}
  local opt = mech.optim.adamw({w}, {lr = 0.1, weight_decay = 0.5})
  opt:step()
  local expect = {}
  for i, p in ipairs {1, -2, 0.5} do
    local g = ({0.3, -4, 0})[i]
    expect[i] = p * (1 - 0.1 * 0.5) - 0.1 * g / (math.abs(g) + 1e-8)
  end
  T.near(w:tolist(), expect, 1e-6)
end)

-- SGD in double precision, PyTorch's order (optim.h): the float32 results are within rounding.
local function sgd_reference(p, grads, o)
  local buf
  for s, g in ipairs(grads) do
    local d = {}
    for i = 1, #p do d[i] = g[i] + (o.weight_decay or 0) * p[i] end
    if (o.momentum or 0) ~= 0 then
      if not buf then
        buf = {table.unpack(d)}
      else
        for i = 1, #p do buf[i] = o.momentum * buf[i] + (1 - (o.dampening or 0)) * d[i] end
      end
      for i = 1, #p do d[i] = o.nesterov and d[i] + o.momentum * buf[i] or buf[i] end
    end
    for i = 1, #p do p[i] = p[i] - o.lr * d[i] end
    _ = s
  end
  return p
end

T.test("SGD: plain, momentum, dampening, nesterov and weight decay against hand-computed values", function()
  local grads = {{0.5, -1, 2}, {0.25, 0.5, -1}, {-0.75, 1, 0.125}}
  local cases = {
    {lr = 0.1},
    {lr = 0.1, momentum = 0.9},
    {lr = 0.05, momentum = 0.9, dampening = 0.5},
    {lr = 0.1, momentum = 0.9, nesterov = true},
    {lr = 0.1, momentum = 0.5, nesterov = true, weight_decay = 0.1},
    {lr = 0.2, weight_decay = 0.3},
  }
  for k, o in ipairs(cases) do
    local w = leaf {1, -2, 3}
    local opt = mech.optim.sgd({w}, o)
    for _, g in ipairs(grads) do
      w.grad = mech.tensor(g)
      opt:step()
    end
    T.near(w:tolist(), sgd_reference({1, -2, 3}, grads, o), 2e-6, "case " .. k)
  end
  -- one case written out: momentum 0.9, three steps of g = 1 from p = 0 with lr 1:
  -- buf 1, 1.9, 2.71 -> p = -1, -2.9, -5.61; nesterov adds 0.9*buf: d 1.9, 2.71, 3.439 -> -1.9, -4.61, -8.049
  for _, c in ipairs {{false, -5.61}, {true, -8.049}} do
    local w = leaf {0}
    local opt = mech.optim.sgd({w}, {lr = 1, momentum = 0.9, nesterov = c[1]})
    for _ = 1, 3 do
      w.grad = mech.tensor {1}
      opt:step()
    end
    T.near(w:tolist(), {c[2]}, 1e-5)
  end
end)

T.test("groups: no weight decay on norms and biases, each group its own lr", function()
  local m = tiny()
  local decay, no_decay = {}, {}
  for _, np in ipairs(m:named_parameters()) do
    local name, p = np[1], np[2]
    if #p:shape() < 2 or name:find("norm") or name:find("ln_") then
      no_decay[#no_decay + 1] = p
    else
      decay[#decay + 1] = p
    end
  end
  local opt = mech.optim.adamw({{params = decay}, {params = no_decay, weight_decay = 0, lr = 0.5}},
    {lr = 0.1, weight_decay = 0.2})
  T.eq(opt.n_groups, 2)
  local groups = opt:param_groups()
  T.eq({groups[1].lr, groups[1].weight_decay, groups[2].lr, groups[2].weight_decay}, {0.1, 0.2, 0.5, 0})
  T.eq({#groups[1].params, #groups[2].params}, {#decay, #no_decay})
  T.eq(groups[2].betas, {0.9, 0.999}) -- defaults come from the constructor's
  -- zero gradients: Adam's step is 0, so only the decay moves a parameter, p * (1 - lr * wd)
  local before_d, before_n = decay[1]:tolist(), no_decay[1]:tolist()
  m:zero_grad()
  opt:step()
  T.eq(no_decay[1]:tolist(), before_n)
  local expect = {}
  for i, row in ipairs(before_d) do
    expect[i] = {}
    for j, v in ipairs(row) do expect[i][j] = v * (1 - 0.1 * 0.2) end
  end
  T.near(decay[1]:tolist(), expect, 1e-7)
  T.truthy(decay[1]:tolist()[1][1] ~= before_d[1][1])
  opt:set_lr(0.01, 1) -- 0-based group index
  T.eq({opt:get_lr(0), opt:get_lr(1), opt.lr}, {0.1, 0.01, 0.1})
  opt:set_lr(0.3)
  T.eq({opt:get_lr(0), opt:get_lr(1)}, {0.3, 0.3})
  opt.lr = 0.25 -- every group's
  T.eq({opt:get_lr(0), opt:get_lr(1)}, {0.25, 0.25})
  T.raises(function() opt.lr = -1 end, "opt.lr: expected a finite learning rate >= 0, got -1")
  T.raises(function() opt.momentum = 1 end, "mech.optim: field 'momentum' cannot be set")
end)

T.test("state_dict round trip resumes exactly (AdamW and SGD with momentum)", function()
  local tokens, targets = toy_batch()
  local function run(m, opt, steps)
    for _ = 1, steps do
      opt:zero_grad()
      m:loss(tokens, targets):backward()
      opt:step()
    end
  end
  for _, make in ipairs {
    function(m) return mech.optim.adamw(m, {lr = 1e-2}) end,
    function(m) return mech.optim.sgd(m, {lr = 0.1, momentum = 0.9, nesterov = true}) end,
  } do
    local a = tiny()
    local oa = make(a)
    run(a, oa, 3)
    local sd = oa:state_dict()
    -- a second model and optimiser resumed from a's weights and optimiser state
    local b = tiny(99)
    mech.no_grad(function()
      for i, np in ipairs(b:named_parameters()) do np[2]:copy_(a:named_parameters()[i][2]) end
    end)
    local ob = make(b)
    ob:load_state_dict(sd)
    T.eq(ob:state_dict().state[0].step, 3)
    run(a, oa, 2)
    run(b, ob, 2)
    T.eq(weights(b), weights(a), oa.kind)
    -- the saved dict is a snapshot: later steps did not change it
    T.eq(sd.state[0].step, 3)
  end
end)

T.test("a module: any table with :parameters() or :named_parameters()", function()
  local w, b = leaf {{1, 2}, {3, 4}}, leaf {0.5, -0.5}
  local module = {parameters = function() return {w, b} end}
  local opt = mech.optim.sgd(module, {lr = 0.5})
  T.eq(opt.n_params, 2)
  local named = {named_parameters = function() return {bias = b, weight = w} end}
  local opt2 = mech.optim.sgd(named, {lr = 0.5})
  T.eq(opt2:parameters()[1]:tolist(), b:tolist()) -- sorted by name
  local y = mech.linear(mech.tensor {{1, 1}}, w, b):sum()
  y:backward()
  opt:step()
  T.eq(w:tolist(), {{0.5, 1.5}, {2.5, 3.5}})
  T.eq(b:tolist(), {0, -1})
  opt:zero_grad()
  T.eq(w.grad, nil)
  y = mech.linear(mech.tensor {{1, 1}}, w, b):sum()
  y:backward()
  opt:zero_grad(false) -- keep the tensors, zeroed
  T.eq(w.grad:tolist(), {{0, 0}, {0, 0}})
  -- a parameter without a gradient is skipped, as PyTorch
  opt:zero_grad()
  opt:step()
  T.eq(w:tolist(), {{0.5, 1.5}, {2.5, 3.5}})
end)

T.test("clip_grad_norm scales to max_norm and returns the norm before clipping", function()
  local a, b = leaf {3, 0}, leaf {{0, 4}}
  a.grad = mech.tensor {3, 0}
  b.grad = mech.tensor {{0, 4}}
  T.near(mech.optim.clip_grad_norm({a, b}, 10), 5, 1e-12)
  T.eq(a.grad:tolist(), {3, 0}) -- under the limit: unchanged
  T.near(mech.optim.clip_grad_norm({a, b}, 1), 5, 1e-12)
  T.near(a.grad:tolist(), {0.6, 0}, 1e-6)
  T.near(b.grad:tolist(), {{0, 0.8}}, 1e-6)
  T.near(mech.optim.clip_grad_norm(a, 1), 0.6, 1e-6) -- a single tensor
  local m = tiny()
  local tokens, targets = toy_batch()
  m:zero_grad()
  m:loss(tokens, targets):backward()
  local opt = mech.optim.adamw(m)
  local norm = mech.optim.clip_grad_norm(opt, 0.01) -- the optimiser's tensors
  T.truthy(norm > 0.01)
  T.near(mech.optim.clip_grad_norm(m, math.huge), 0.01, 1e-6) -- the model's: now at the limit
end)

T.test("schedules of mech.lr_schedule drive set_lr", function()
  local sched = mech.lr_schedule {kind = "linear", lr = 0.1, total = 10, warmup = 0.2}
  local w = leaf {1}
  local opt = mech.optim.sgd({w}, {lr = 0})
  local p = 1
  for step = 0, 9 do
    opt:set_lr(sched(step))
    w.grad = mech.tensor {1}
    opt:step()
    p = p - sched(step)
    T.eq(opt.lr, sched(step))
  end
  T.near(w:tolist(), {p}, 1e-6)
  -- the options are read by mlL_options, in the one format
  T.raises(function() mech.lr_schedule {kind = "cosin"} end, "bad argument #1 to 'mech.lr_schedule' (option 'kind': "
    .. "expected one of 'constant', 'constant_with_warmup', 'linear', 'cosine', got 'cosin')")
  T.raises(function() mech.lr_schedule {warmup = 2} end,
    "bad argument #1 to 'mech.lr_schedule' (option 'warmup': expected a number in [0, 1], got 2.0)")
  T.raises(function() mech.lr_schedule {lr = 0 / 0} end,
    "bad argument #1 to 'mech.lr_schedule' (option 'lr': expected a finite number >= 0, got ")
  T.raises(function() mech.lr_schedule {total = -1} end,
    "bad argument #1 to 'mech.lr_schedule' (option 'total': expected an integer >= 0, got -1)")
  -- the defaults are ml_schedule_config_init's: cosine, lr 1e-3, total 0, warmup 0.1
  T.eq(mech.lr_schedule {}(0), 1e-3)
end)

T.test("bad input names the function, the argument, what was expected and what came", function()
  local w = leaf {1, 2}
  T.raises(function() mech.optim.adamw({w, w * 2}) end,
    "bad argument #1 to 'mech.optim.adamw' (element 2 expected a float32 contiguous leaf tensor that requires grad, got a non-leaf tensor (made by MulBackward; optimise the leaf it came from))")
  T.raises(function() mech.optim.sgd({mech.tensor {1}}) end,
    "bad argument #1 to 'mech.optim.sgd' (element 1 expected a float32 contiguous leaf tensor that requires grad, got a tensor that does not require grad (frozen))")
  T.raises(function() mech.optim.sgd({w, "x"}) end, "bad argument #1 to 'mech.optim.sgd' (element 2 expected a tensor, got 'x')")
  T.raises(function() mech.optim.adamw({w}, {lr = 1, learning_rate = 2}) end,
    "bad argument #2 to 'mech.optim.adamw' (unknown option 'learning_rate'; did you mean 'lr'?)")
  T.raises(function() mech.optim.adamw({w}, {lr = -1}) end,
    "bad argument #2 to 'mech.optim.adamw' (option 'lr': expected a finite number >= 0, got -1)")
  T.raises(function() mech.optim.sgd({{params = {w}}, {params = {leaf {1}}, lr = -0.5}}) end,
    "bad argument #1 to 'mech.optim.sgd' (group 2: option 'lr': expected a finite number >= 0, got -0.5)")
  T.raises(function() mech.optim.sgd({{params = {w}, momentm = 0.9}}) end,
    "bad argument #1 to 'mech.optim.sgd' (group 1: unknown option 'momentm'; did you mean 'momentum'?)")
  T.raises(function() mech.optim.sgd({{lr = 1}}) end, "bad argument #1 to 'mech.optim.sgd' (group 1 has no 'params')")
  T.raises(function() mech.optim.sgd({{params = {w}, nesterov = 1}}) end,
    "bad argument #1 to 'mech.optim.sgd' (group 1: option 'nesterov': expected a boolean, got 1)")
  T.raises(function() mech.optim.sgd({w}, {nesterov = true}) end, "bad argument #2 to 'mech.optim.sgd' (option 'nesterov': expected momentum > 0")
  -- mech.adamw(model) reads betas as mech.optim.adamw does (it used to accept the key and ignore it)
  local m = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 8 }
  T.eq({ mech.adamw(m, { betas = { 0.8, 0.99 } }).beta1, mech.adamw(m, { betas = { 0.8, 0.99 } }).beta2 }, { 0.8, 0.99 })
  T.eq(mech.adamw(m, { betas = { 0.8, 0.99 }, beta2 = 0.9 }).beta2, 0.9)
  T.raises(function() mech.adamw(m, { eps = "x" }) end, "bad argument #2 to 'mech.adamw' (option 'eps': expected a number, got 'x')")
  T.raises(function() mech.optim.adamw({w}, {betas = {0.9}}) end, "bad argument #2 to 'mech.optim.adamw' (option 'betas': expected a list of two numbers {beta1, beta2}, got table)")
  T.raises(function() mech.optim.adamw({w}, {beta2 = 1}) end, "bad argument #2 to 'mech.optim.adamw' (option 'beta2': expected a number in [0, 1), got 1)")
  T.raises(function() mech.optim.adamw({w, w}) end, "bad argument #1 to 'mech.optim.adamw' (element 2 is the same tensor as argument 1 element 1 (a parameter may appear once))")
  T.raises(function() mech.optim.adamw({}) end, "bad argument #1 to 'mech.optim.adamw' (expected a non-empty list of tensors, a mech.Model or a module, got table)")
  T.raises(function() mech.optim.adamw(42) end, "mech.optim.adamw: argument 1 expected a list of tensors, a mech.Model or a module with :parameters(), got 42")
  T.raises(function() mech.optim.adamw({parameters = function() return 1 end}) end, "its parameters method returned 1")
  T.raises(function() mech.optim.adamw({w}, 3) end, "bad argument #2 to 'mech.optim.adamw' (an option table expected, got 3)")
  local opt = mech.optim.sgd({w}, {lr = 0.1})
  T.raises(function() opt:set_lr(-1) end, "bad argument #1 to 'optimizer:set_lr' (a finite learning rate >= 0 expected, got -1)")
  T.raises(function() opt:set_lr(0.1, 1) end, "bad argument #2 to 'optimizer:set_lr' (a group index in [0, 0] expected, got 1)")
  T.raises(function() opt:zero_grad(1) end, "bad argument #1 to 'optimizer:zero_grad' (a boolean set_to_none expected, got 1)")
  T.raises(function() opt:load_state_dict(5) end, "bad argument #1 to 'optimizer:load_state_dict' (a table from opt:state_dict() expected, got 5)")
  T.raises(function() opt:load_state_dict(mech.optim.adamw({leaf {1}}):state_dict()) end,
    "bad argument #1 to 'optimizer:load_state_dict' (expected the state of a sgd optimizer, got kind adamw)")
  local other = mech.optim.sgd({leaf {1, 2, 3}}, {momentum = 0.5})
  other:parameters()[1].grad = mech.tensor {1, 1, 1}
  other:step()
  T.raises(function() opt:load_state_dict(other:state_dict()) end,
    "bad argument #1 to 'optimizer:load_state_dict' (state[0].momentum_buffer has float32 [3], expected float32 [2] (parameter 0))")
  w.grad = mech.tensor {{1, 2}}:reshape(2)
  T.raises(function() opt.step(nil) end, "calling 'optimizer:step' on bad self (a mech.optim optimizer (mech.optim.adamw or mech.optim.sgd) expected, got nil)")
  T.raises(function() mech.optim.clip_grad_norm({w}, -1) end,
    "bad argument #2 to 'mech.optim.clip_grad_norm' (a number max_norm >= 0 expected, got -1)")
  T.raises(function() mech.optim.clip_grad_norm({w, 7}, 1) end,
    "bad argument #1 to 'mech.optim.clip_grad_norm' (element 2 expected a tensor, got 7)")
  -- nothing half-done: a failed constructor leaves no optimiser, a failed load changes nothing
  T.eq(opt:get_lr(), 0.1)
end)

T.test("printing shows the groups", function()
  local opt = mech.optim.sgd({{params = {leaf {1}}}, {params = {leaf {2, 3}}, lr = 0.5}}, {momentum = 0.9})
  local s = tostring(opt)
  T.truthy(s:find("mech.optim.sgd(2 tensors, 3 elements", 1, true), s)
  T.truthy(s:find("group 1: 1 tensors, lr 0.5, momentum 0.9", 1, true), s)
end)

T.done()
