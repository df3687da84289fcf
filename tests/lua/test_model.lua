-- Models from Lua: construction, parameters, hooks, training steps, checkpoints and the
-- training loop (including exact resumption in a fresh process).
local T = require "check"
local train = require "mech.train"

local function tiny(extra)
  local cfg = { arch = "attention", d_model = 16, n_layers = 2, vocab = 20, max_pos = 64, seed = 3 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return mech.model(cfg)
end

local function toy_batch()
  local tokens = mech.tensor({ { 1, 5, 6, 7, 8, 2, 5, 0 }, { 1, 9, 10, 11, 12, 2, 11, 0 } }, { dtype = "int32" })
  local targets = mech.full({ 2, 8 }, -100, { dtype = "int32" })
  targets[{ 0, 6 }] = 6
  targets[{ 1, 6 }] = 12
  return tokens, targets
end

T.test("parameter counts and names follow the spec", function()
  T.eq(mech.model { arch = "attention", vocab = 8196 }:n_params(), 689792)
  T.eq(mech.model { arch = "attention", vocab = 8195, pos_emb = false }:n_params(), 624192)
  local m = tiny()
  local names = {}
  for _, p in ipairs(m:named_parameters()) do names[p[1]] = p[2]:shape() end
  T.eq(names["backbone.layers.0.sequence_mixer.Wqkv.weight"], { 48, 16 })
  T.eq(names["backbone.embeddings.word_embeddings.weight"], { 20, 16 })
  T.eq(m:param("backbone.ln_f.bias"):shape(), { 16 })
  T.raises(function() m:param("backbone.ln_f.bais") end, "did you mean 'backbone.ln_f.bias'")
end)

T.test("bad configs are errors naming the key", function()
  T.raises(function() mech.model { arch = "transformer" } end, "option 'arch': expected one of")
  T.raises(function() mech.model { d_modle = 4 } end, "bad argument #1 to 'mech.model' (unknown option 'd_modle'; did you mean 'd_model'?)")
  T.raises(function() mech.model { d_model = "big" } end, "bad argument #1 to 'mech.model' (option 'd_model': expected an integer, got 'big')")
  T.raises(function() mech.model { n_heads = 3 } end, "'n_heads' (3) must divide 'd_model' (64)")
  T.raises(function() mech.model { state_mixer = "moe" } end, "state_mixer")
end)

T.test("sites: model:site builds the name, hook_names entries carry id, layer and component", function()
  local m = tiny()
  T.eq(m:site(1, "block_input"), "blocks.1.block_input")
  T.eq(m:site(0, "hook_resid_pre"), "blocks.0.block_input") -- TransformerLens names
  T.eq(m:site(0, "q"), "blocks.0.mixer.head_q") -- per head, as TransformerLens's hook_q
  T.raises(function() m:site(2, "block_input") end, "bad argument #1 to 'model:site' (expected a layer in [0, 2), got 2 (the model has 2 layers))")
  T.raises(function() m:site(-1, "block_input") end, "the model has 2 layers")
  T.raises(function() m:site("x", "block_input") end, "expected a layer in [0, 2)")
  T.raises(function() m:site(0, "mlp_outptu") end, "site: layer 0 has no component 'mlp_outptu' (did you mean 'mlp_output'?")
  T.raises(function() m:site(0) end, "bad argument")
  local sites = m:hook_names()
  for i, s in ipairs(sites) do
    T.eq(s.id, i - 1)
    T.eq(m:site(s.layer, s.component), s.name)
  end
  T.eq(sites[1].layer, 0)
  T.eq(sites[1].component, "block_input")
  local q = m:hook_names("blocks.1.attn.hook_q") -- a pattern: the per-head site and the flat one
  T.eq(#q, 2)
  T.eq({ q[1].layer, q[1].component, q[2].component }, { 1, "mixer.q", "mixer.head_q" })
  local mamba = tiny { arch = "mamba" }
  T.raises(function() mamba:site(0, "mixer.q") end, "layer 0 has no component 'mixer.q'")
end)

T.test("hook sites: listed with shapes, each fires once, unknown names suggest", function()
  local m = tiny()
  local sites = m:hook_names()
  T.eq(sites[1].name, "blocks.0.block_input")
  T.eq(sites[1].shape, { "B", "L", 16 })
  local tokens = toy_batch()
  local fired, hooks = {}, {}
  for _, s in ipairs(sites) do
    hooks[s.name] = function(act, ctx)
      fired[ctx.site] = (fired[ctx.site] or 0) + 1
      T.eq(ctx.layer, tonumber(s.name:match("blocks%.(%d+)")))
    end
  end
  local base = m:forward(tokens)
  local hooked = m:forward(tokens, hooks)
  T.truthy(base:equal(hooked), "observing hooks change no bit")
  for _, s in ipairs(sites) do T.eq(fired[s.name], 1, s.name) end
  T.raises(function() m:forward(tokens, { ["blocks.0.mlp_ouput"] = function() end }) end,
    "did you mean 'blocks.0.mlp_output'")
  T.raises(function() m:forward(tokens, { ["blocks.0.mlp_output"] = function() return mech.zeros(1) end }) end,
    "hook at blocks.0.mlp_output returned a float32 tensor of shape [1], expected float32 [2,8,16]")
  T.raises(function() m:forward(tokens, { ["blocks.0.mlp_output"] = function() error("inside") end }) end, "inside")
end)

T.test("replacements change the output and take part in autograd", function()
  local m = tiny()
  local tokens, targets = toy_batch()
  local zeroed = m:forward(tokens, { ["blocks.1.attention_output"] = function(a) return a * 0 end })
  T.falsy(zeroed:equal(m:forward(tokens)))
  local loss = m:loss(tokens, targets, { ["blocks.0.block_output"] = function(a) return a * 2 end })
  m:zero_grad()
  loss:backward()
  T.truthy(m:param("backbone.layers.0.sequence_mixer.Wqkv.weight").grad:abs():sum():item() > 0)
end)

T.test("add_hook handles remove themselves, also through <close>", function()
  local m = tiny()
  local tokens = toy_batch()
  local n = 0
  do
    local h <close> = m:add_hook("blocks.0.attention_input", function() n = n + 1 end)
    m:forward(tokens)
    m:forward(tokens)
  end
  m:forward(tokens)
  T.eq(n, 2)
  local h = m:add_hook("blocks.1.mixer.pattern", function() n = n + 10 end)
  m:forward(tokens)
  h:remove()
  h:remove() -- twice is harmless
  m:forward(tokens)
  T.eq(n, 12)
end)

T.test("train_step learns a toy mapping; evaluate reports accuracy", function()
  local m = tiny()
  local opt = mech.adamw(m)
  local tokens, targets = toy_batch()
  local first = m:evaluate(tokens, targets)
  for _ = 1, 100 do m:train_step(opt, tokens, targets, 1e-2) end
  local last = m:evaluate(tokens, targets)
  T.truthy(last.loss < 0.1 * first.loss, first.loss .. " -> " .. last.loss)
  T.eq(last.correct, 2)
  T.eq(opt.step, 100)
end)

T.test("checkpoints round-trip and refuse bad files", function()
  local m = tiny()
  local path = os.tmpname()
  m:save(path, { meta = { note = "hello", step = 3 } })
  local m2, opt, meta = mech.load(path)
  T.eq(opt, nil)
  T.eq(meta.note, "hello")
  T.eq(meta.step, "3")
  local tokens = toy_batch()
  T.truthy(m:forward(tokens):equal(m2:forward(tokens)))
  local f = io.open(path, "wb")
  f:write("garbage")
  f:close()
  T.raises(function() mech.load(path) end, "load: ")
  os.remove(path)
  T.raises(function() m:save("/nonexistent/dir/x.safetensors") end, "nonexistent")
end)

-- The training loop: k steps, checkpoint, resume in a fresh process, and the parameters equal
-- those of N steps straight, bit for bit.
T.test("training resumes exactly in a fresh process", function()
  local dir = os.tmpname()
  os.remove(dir)
  local cfg = [[{ model = {arch = "attention", d_model = 16}, task = mech.task.ar{num_kv = 32, length = 8},
    train_docs = 320, eval_docs = 64, steps = 12, eval_every = 6, lr = 3e-3, quiet = true }]]
  local exe = arg[-1]
  local function run(code)
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write('local train = require "mech.train"\nlocal cfg = ' .. cfg .. '\n' .. code)
    f:close()
    local ok = os.execute(string.format("%q %q", exe, script))
    os.remove(script)
    T.truthy(ok, "child run failed: " .. code)
  end
  run(string.format('cfg.out = %q; train.run(cfg)', dir .. "/straight"))
  run(string.format('cfg.out = %q; cfg.stop_at = 5; train.run(cfg)', dir .. "/part"))
  run(string.format('cfg.out = %q; cfg.resume = %q; train.run(cfg)', dir .. "/part", dir .. "/part/checkpoint.safetensors"))
  local a = mech.load(dir .. "/straight/checkpoint.safetensors")
  local b = mech.load(dir .. "/part/checkpoint.safetensors")
  for i, p in ipairs(a:named_parameters()) do
    T.truthy(p[2]:equal(b:named_parameters()[i][2]), p[1])
  end
  local manifest = io.open(dir .. "/straight/manifest.json"):read("a")
  T.truthy(manifest:find('"steps": 12', 1, true), manifest)
  local csv = io.open(dir .. "/straight/metrics.csv"):read("a")
  T.truthy(csv:find("^step,split,metric,value\n"), csv)
  T.truthy(csv:find("\n12,test,accuracy,", 1, true), csv)
  os.execute(string.format("rm -rf %q", dir))
end)

T.test("bad token ids and shapes are errors, not crashes", function()
  local m = tiny()
  local opt = mech.adamw(m)
  local bad = mech.tensor({ { 1, 99 } }, { dtype = "int32" })
  T.raises(function() m:forward(bad) end, "bad argument #1 to 'model:forward' (token id 99 out of range for vocabulary size 20)")
  T.raises(function() m:forward(mech.tensor({ { -1 } }, { dtype = "int32" })) end, "token id -1")
  T.raises(function() m:train_step(opt, bad, bad, 1e-3) end, "train_step: token id 99")
  T.raises(function() m:forward(mech.zeros(2, 3)) end, "int32 token ids")
  T.raises(function() m:loss(mech.tensor({ { 1, 2 } }, { dtype = "int32" }), mech.tensor({ { 1 } }, { dtype = "int32" })) end,
    "targets")
  T.raises(function() m:forward(mech.zeros({ 1, 2000 }, { dtype = "int32" })) end, "exceeds the position table")
  T.raises(function() m:train_step(m, bad, bad, 1e-3) end, "bad argument #1 to 'model:train_step' (a mech.AdamW optimiser expected, got userdata)")
  collectgarbage("collect")
end)

T.test("an option the architecture does not read is an error naming it", function()
  T.raises(function() mech.model { arch = "attention", d_state = 8 } end,
    "mech.model: option 'd_state' does not apply to arch 'attention'")
  T.raises(function() mech.model { arch = "mamba", n_heads = 2 } end, "option 'n_heads' does not apply to arch 'mamba'")
  T.raises(function() mech.model { arch = "h3", d_conv = 2 } end, "option 'd_conv' does not apply to arch 'h3'")
  -- an alias reads what its mixer reads; common options apply everywhere
  T.eq(mech.model { arch = "mamba_without_conv", d_state = 8, vocab = 16 }:config().d_state, 8)
  T.eq(mech.model { arch = "based_long_only", feature_dim = 4, vocab = 16 }:config().feature_dim, 4)
  local c = mech.model { arch = "hyena", d_model = 16, vocab = 16, pos_emb = false, seed = 3 }:config()
  T.eq(c.d_model, 16); T.eq(c.pos_emb, false); T.eq(c.seed, 3); T.eq(c.d_conv, -1); T.eq(c.no_conv, false)
end)

T.test("checkpoints written before the mixer descriptors load, with the same logits and config", function()
  local dir = "tests/fixtures/checkpoints_v1/"
  local tokens = mech.tensor({ { 1, 5, 6, 7, 8, 2, 5, 0 }, { 3, 9, 10, 11, 12, 2, 11, 4 } }, { dtype = "int32" })
  local names = {}
  for _, a in ipairs(mech.architectures) do names[#names + 1] = a end
  names[#names + 1] = "mamba_without_conv"
  for _, name in ipairs(names) do
    local m, opt, meta = mech.load(dir .. name .. ".safetensors")
    T.truthy(opt ~= nil, name .. ": optimiser state")
    local want = {}
    for v in meta.logits:gmatch("[^,]+") do want[#want + 1] = tonumber(v) end
    local got = m:forward(tokens):reshape(-1):tolist()
    T.eq(#got, #want, name)
    for i = 1, #want do T.truthy(math.abs(got[i] - want[i]) <= 1e-5 * (1 + math.abs(want[i])), name .. " logit " .. i) end
    -- saving again writes the same config text (the options table keeps the JSON's keys and order)
    local path = os.tmpname()
    m:save(path, { optimizer = opt })
    local _, _, meta2 = mech.load(path)
    os.remove(path)
    T.eq(meta2["mechlab.config"], meta["mechlab.config"], name)
  end
  T.eq(mech.load(dir .. "mamba_without_conv.safetensors"):config().no_conv, true)
end)

T.test("train.run validates its config", function()
  T.raises(function() train.run { lr = "fast" } end, "'lr' expected a number")
  T.raises(function() train.run { eval_evry = 10 } end, "unknown config key 'eval_evry' (did you mean 'eval_every'?)")
end)

T.done()
