-- PyTorch interop (docs/interop.md): plain state dicts in, PyTorch-shaped state dicts out, tensors
-- and caches to safetensors, and checkpoint metadata that is validated, not trusted.
local T = require "check"
local json = require "mech.json"

local FIX = "tests/fixtures/torch/"
local ARCHS = { "attention", "hyena", "h3", "mamba" }

local function fixture(arch)
  local expected, meta = mech.load_tensors(FIX .. arch .. "_expected.safetensors")
  return FIX .. arch .. ".safetensors", json.decode(meta.options), expected
end

local function tmp()
  local p = os.tmpname()
  os.remove(p)
  return p .. ".safetensors"
end

-- Loads `path`'s tensors and metadata, lets `edit` change them, and writes them to a new file.
local function edited(path, edit)
  local t, meta = mech.load_tensors(path)
  edit(t, meta)
  local out = tmp()
  mech.save_tensors(out, t, meta)
  return out
end

local function max_diff(a, b) return (a - b):abs():max():item() end

T.test("plain PyTorch state dicts load with the model options and match PyTorch's logits", function()
  for _, arch in ipairs(ARCHS) do
    local path, options, expected = fixture(arch)
    local m, opt, meta = mech.load(path, options)
    T.eq(opt, nil)
    T.eq(next(meta), nil, arch .. ": the file has no metadata")
    local d = max_diff(m:forward(expected.tokens), expected.logits)
    T.truthy(d <= 1e-5, arch .. ": logits differ by " .. d)
  end
end)

T.test("a plain state dict without options, or with options that do not fit, names what is wrong", function()
  local path, options = fixture("attention")
  T.raises(function() mech.load(path) end, "needs the model options")
  options.d_model = 16
  T.raises(function() mech.load(path, options) end,
    "parameter 'backbone.embeddings.word_embeddings.weight' has float32 [11,8], expected float32 [11,16]")
  T.raises(function() mech.load(path, { arch = "attention", d_state = 4 }) end, "'d_state' does not apply")
  T.raises(function() mech.load(path, { arch = "attention", widht = 4 }) end, "widht")
end)

T.test("aliases and buffers are accepted when equal and named when not", function()
  local path, options = fixture("hyena")
  local freq = "backbone.layers.1.sequence_mixer.filter_fn.implicit_filter.3.freq"
  local cases = {
    ["lm_head.weight"] = "alias 'lm_head.weight' differs from 'backbone.embeddings.word_embeddings.weight'",
    [freq] = "alias '" .. freq .. "' differs",
    ["backbone.layers.0.sequence_mixer.filter_fn.modulation.deltas"] = "buffer 'backbone.layers.0.sequence_mixer.filter_fn.modulation.deltas' differs from what mechlab computes",
    ["backbone.layers.1.sequence_mixer.filter_fn.pos_emb.t"] = "buffer 'backbone.layers.1.sequence_mixer.filter_fn.pos_emb.t' differs",
  }
  for name, message in pairs(cases) do
    local bad = edited(path, function(t) t[name] = t[name] * 1.001 end)
    T.raises(function() mech.load(bad, options) end, message)
    os.remove(bad)
  end
  local wrong_shape = edited(path, function(t) t["lm_head.weight"] = mech.zeros(3, 8) end)
  T.raises(function() mech.load(wrong_shape, options) end, "alias 'lm_head.weight' has float32 [3,8], expected float32 [11,8]")
  os.remove(wrong_shape)
  -- safetensors' save_model drops the second names of shared tensors; buffers are optional too
  local dropped = edited(path, function(t)
    for name in pairs(t) do
      if name == "lm_head.weight" or name:find("%.[35]%.freq$") or name:find("pos_emb%.t$") or name:find("deltas$") then
        t[name] = nil
      end
    end
  end)
  local m = mech.load(dropped, options)
  local _, _, expected = fixture("hyena")
  T.truthy(max_diff(m:forward(expected.tokens), expected.logits) <= 1e-5)
  os.remove(dropped)
  local extra = edited(path, function(t) t["backbone.layers.0.sequence_mixer.filter_fn.extra"] = mech.zeros(2) end)
  T.raises(function() mech.load(extra, options) end, "unexpected tensor 'backbone.layers.0.sequence_mixer.filter_fn.extra'")
  os.remove(extra)
end)

T.test("model:save{torch = true} writes the full PyTorch state dict, which loads back", function()
  for _, arch in ipairs(ARCHS) do
    local path, options, expected = fixture(arch)
    local m = mech.load(path, options)
    local out = tmp()
    m:save(out, { torch = true })
    local mine, theirs = mech.load_tensors(out), mech.load_tensors(path)
    for name, t in pairs(theirs) do
      T.truthy(mine[name], arch .. ": the torch save lacks '" .. name .. "'")
      T.truthy(max_diff(mine[name], t) <= 1e-6 * math.max(1, t:abs():max():item()), arch .. ": '" .. name .. "' differs")
    end
    for name in pairs(mine) do T.truthy(theirs[name], arch .. ": the torch save has an extra '" .. name .. "'") end
    local back = mech.load(out) -- its own config is in the metadata
    T.truthy(back:forward(expected.tokens):equal(m:forward(expected.tokens)), arch)
    T.truthy(mech.load(out, options), "matching options are accepted")
    os.remove(out)
  end
  local plain = tmp()
  local m = mech.load(fixture("hyena"))
  m:save(plain)
  local keys = mech.load_tensors(plain)
  T.eq(keys["lm_head.weight"], nil, "a mechlab checkpoint stores each parameter once")
  local path, options = fixture("attention")
  local a = mech.load(path, options)
  T.raises(function() a:save(plain, { torch = true, optimizer = mech.adamw(a) }) end, "holds no optimiser state")
  a:save(plain)
  options.n_heads = 1
  T.raises(function() mech.load(plain, options) end, "option 'n_heads' is 1 but the file's config has 2")
  os.remove(plain)
end)

T.test("save_tensors / load_tensors round-trip tensors and metadata; bad arguments are named", function()
  local path = tmp()
  local x = mech.arange(12):view(3, 4)
  local tensors = { x = x, xt = x:transpose(0, 1), ids = mech.tensor({ 1, 2, 3 }, { dtype = "int32" }), empty = mech.zeros(0, 2) }
  mech.save_tensors(path, tensors, { note = "hi" })
  local back, meta = mech.load_tensors(path)
  T.eq(meta.note, "hi")
  for name, t in pairs(tensors) do
    T.eq(back[name]:shape(), t:shape(), name)
    T.eq(back[name]:dtype(), t:dtype(), name)
    T.truthy(back[name]:equal(t), name)
  end
  T.raises(function() mech.save_tensors(path, { x = 3 }) end, "mech.save_tensors: 'x' expected a mech.Tensor, got number")
  T.raises(function() mech.save_tensors(path, { x }) end, "tensor names must be strings")
  T.raises(function() mech.save_tensors(path, {}, { k = 1 }) end, "metadata expected string keys and string values")
  T.raises(function() mech.save_tensors("/nonexistent/dir/x.safetensors", tensors) end, "nonexistent")
  T.eq(mech.load_tensors(path).x:shape(), { 3, 4 }, "a failed save leaves the old file")
  T.raises(function() mech.load_tensors("/nonexistent.safetensors") end, "nonexistent")
  os.remove(path)
end)

T.test("cache:save writes a run_with_cache result", function()
  local m = mech.model { arch = "hyena", d_model = 8, n_layers = 1, vocab = 10, max_pos = 8 }
  local tokens = mech.tensor({ { 1, 2, 3, 4 } }, { dtype = "int32" })
  local _, cache, grads = m:run_with_cache(tokens, { grads = true, targets = mech.tensor({ 5 }, { dtype = "int32" }) })
  local path = tmp()
  cache:save(path)
  local back = mech.load_tensors(path)
  local n = 0
  for name, t in pairs(cache) do
    n = n + 1
    T.truthy(back[name]:equal(t), name)
  end
  T.truthy(n > 6 and back["blocks.0.mixer.filter"])
  grads:save(path)
  T.truthy(mech.load_tensors(path)["blocks.0.block_output"]:equal(grads["blocks.0.block_output"]))
  os.remove(path)
end)

-- Issue 16 item 8: every metadata field is validated.
T.test("checkpoint metadata is validated field by field", function()
  local m = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 10, max_pos = 8 }
  local good = tmp()
  m:save(good, { optimizer = mech.adamw(m) })
  local function refuse(edit, message)
    local bad = edited(good, edit)
    T.raises(function() mech.load(bad) end, message)
    os.remove(bad)
  end
  for _, step in ipairs { "-1", "inf", "nan", "1e19", "1.5", "9007199254740992", "", " 1", "0x10" } do
    refuse(function(_, meta) meta["optimizer.step"] = step end, "metadata 'optimizer.step' expected an integer in [0, 2^53)")
  end
  refuse(function(_, meta) meta["optimizer.beta1"] = "nan" end, "metadata 'optimizer.beta1' expected a finite number")
  refuse(function(_, meta) meta["optimizer.beta2"] = "1.5" end, "beta2 1.5 is not in [0, 1)")
  refuse(function(t) t["optimizer.exp_avg_sq"] = nil end, "partial optimiser state: tensor 'optimizer.exp_avg_sq' is missing")
  refuse(function(_, meta) meta["optimizer.eps"] = nil end, "partial optimiser state: metadata 'optimizer.eps' is missing")
  refuse(function(t) t["optimizer.exp_avg"] = mech.zeros(3) end, "optimiser state 'optimizer.exp_avg' has float32 [3]")
  local function config(edit, message)
    refuse(function(_, meta)
      local c = json.decode(meta["mechlab.config"])
      edit(c)
      meta["mechlab.config"] = json.encode(c)
    end, message)
  end
  config(function(c) c.state_mixer = 3 end, "'state_mixer' expected a string")
  config(function(c) c.state_mixer = "moe" end, "option 'state_mixer': expected 'mlp', 'glu' or 'none', got 'moe'")
  config(function(c) c.seed = 1.5 end, "'seed' expected an integer")
  config(function(c) c.d_model = 0 end, "'d_model' expected an integer in [1, 8192]")
  config(function(c) c.n_layers = 2 ^ 31 end, "'n_layers' expected an integer in [1, 16]")
  config(function(c) c.pos_emb = "yes" end, "'pos_emb' expected a boolean")
  config(function(c) c.widht = 8 end, "unknown option 'widht'")
  config(function(c) c.arch = 7 end, "missing string 'arch'")
  local step = edited(good, function(_, meta) meta["optimizer.step"] = "12" end)
  T.eq(select(2, mech.load(step)).step, 12)
  os.remove(step)
  os.remove(good)
end)

-- Issue 16 item 9: the header is checked against the config before the model is allocated.
T.test("a small file claiming a huge model is refused at once", function()
  local m = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 10, max_pos = 8 }
  local good = tmp()
  m:save(good)
  local huge = edited(good, function(_, meta)
    local c = json.decode(meta["mechlab.config"])
    c.vocab, c.d_model, c.n_layers = 2 ^ 24, 256, 16
    meta["mechlab.config"] = json.encode(c)
  end)
  local t0 = mech.sys.time()
  T.raises(function() mech.load(huge) end, "parameter 'backbone.embeddings.word_embeddings.weight' has float32 [10,8], expected float32 [16777216,256]")
  T.truthy(mech.sys.time() - t0 < 1, "refused in " .. (mech.sys.time() - t0) .. " s")
  os.remove(huge)
  os.remove(good)
  -- planning a model costs no memory of its size: Hyena's filter tables are made per forward
  local h = mech.model { arch = "hyena", d_model = 8, n_layers = 1, vocab = 10, pos_emb = false }
  h:save(good)
  local wide = edited(good, function(_, meta)
    local c = json.decode(meta["mechlab.config"])
    c.d_model, c.n_layers = 8192, 16
    meta["mechlab.config"] = json.encode(c)
  end)
  t0 = mech.sys.time()
  T.raises(function() mech.load(wide) end, "expected float32 [10,8192]")
  T.truthy(mech.sys.time() - t0 < 0.2, "refused in " .. (mech.sys.time() - t0) .. " s")
  os.remove(wide)
  os.remove(good)
end)

T.done()
