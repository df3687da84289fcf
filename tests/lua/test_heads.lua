-- Heads (issue 29, item 1): per-head hook sites in TransformerLens's shapes, per-head weight views
-- of the fused parameters (writes go through, gradients flow), TransformerLens names resolving to
-- the flat sites of mixers without heads.
local T = require "check"

local V, D, H = 20, 16, 4
local dh = D // H
local tok = mech.tensor({ { 1, 2, 3, 4, 5, 6 }, { 6, 5, 4, 3, 2, 1 } }, { dtype = "int32" })
local function model(arch) return mech.model { arch = arch or "attention", d_model = D, n_layers = 2, vocab = V, n_heads = H, seed = 3 } end

T.test("per-head sites: q, k, v, z (B, L, H, d_h), result (B, L, H, D); they sum to the mixer's output", function()
  local m = model()
  local _, c = m:run_with_cache(tok)
  for _, n in ipairs { "q", "k", "v", "z" } do
    T.eq(c:get(n, 1):shape(), { 2, 6, H, dh }, n)
    T.truthy(rawequal(c["blocks.1.attn.hook_" .. n], c["blocks.1.mixer.head_" .. n]))
  end
  T.eq(c:get("result", 0):shape(), { 2, 6, H, D })
  T.eq(c:get("pattern", 0):shape(), { 2, H, 6, 6 })
  T.eq((c:get("z", 0):reshape(2, 6, D) - c["blocks.0.mixer.ctx"]):abs():max():item(), 0)
  T.eq((c:get("q", 1):reshape(2, 6, D) - c["blocks.1.mixer.q"]):abs():max():item(), 0)
  -- the fused projection (result not hooked) against Σ_h result + b_O
  local _, flat = m:run_with_cache(tok, { names = "attention_output" })
  local sum = c:get("result", 1):sum(2) + m:weight("b_O", 1)
  T.near((sum - flat["blocks.1.attention_output"]):abs():max():item(), 0, 1e-5)
  -- observing the head sites changes nothing
  local plain = m:forward(tok)
  local hooked = m:run_with_hooks(tok, { ["blocks.0.attn.hook_z"] = function(x) return x end })
  T.eq((plain - hooked):abs():max():item(), 0)
end)

T.test("a head's z zeroed through its site equals zeroing its slice of the flat ctx", function()
  local m = model()
  local a = m:run_with_hooks(tok, { ["blocks.0.attn.hook_z"] = function(z)
    local y = z:clone(); y[{ ":", ":", 2 }] = 0; return y end })
  local b = m:run_with_hooks(tok, { ["blocks.0.mixer.ctx"] = function(x)
    local y = x:clone(); y[{ ":", ":", { 2 * dh, 3 * dh } }] = 0; return y end })
  T.near((a - b):abs():max():item(), 0, 1e-5)
  T.truthy((a - m:forward(tok)):abs():max():item() > 1e-4, "the ablation changed the output")
end)

T.test("W_Q, W_K, W_V, W_O, b_O, W_E, W_pos, W_U are views of the fused parameters", function()
  local m = model()
  local wqkv = m:param("blocks.1.mixer.Wqkv.weight")
  local wo = m:param("blocks.1.mixer.out_proj.weight")
  for k, n in ipairs { "W_Q", "W_K", "W_V" } do
    local w = m:weight(n, 1)
    T.eq(w:shape(), { H, D, dh }, n)
    for _, hde in ipairs { { 0, 0, 0 }, { 1, 5, 2 }, { 3, 15, 3 } } do
      local h, d, e = hde[1], hde[2], hde[3]
      T.eq(w[{ h, d, e }], wqkv[{ (k - 1) * D + h * dh + e, d }], n)
    end
  end
  local w_o = m:weight("W_O", 1)
  T.eq(w_o:shape(), { H, dh, D })
  T.eq(w_o[{ 2, 1, 7 }], wo[{ 7, 2 * dh + 1 }])
  T.eq(m:weight("W_E"):shape(), { V, D })
  T.eq(m:weight("W_U"):shape(), { D, V })
  T.eq(m:weight("W_U")[{ 3, 11 }], m:weight("W_E")[{ 11, 3 }])
  T.eq(m:weight("W_pos"):shape()[2], D)
  T.truthy(rawequal(m:param("blocks.1.attn.W_Q")[{ 1, 2, 3 }], m:weight("W_Q", 1)[{ 1, 2, 3 }]))
  -- writes go through, to the fused weight
  m:weight("W_K", 1)[{ 1, 2, 3 }] = 7
  T.eq(wqkv[{ D + dh + 3, 2 }], 7)
  m:param("blocks.1.attn.W_O")[{ 0, 0 }] = 0
  T.eq(wo[{ 5, 0 }], 0)
  -- the per-head output W_O reproduces a head's result
  local _, c = m:run_with_cache(tok, { names = { "z", "result" } })
  local r = mech.einsum("blhe,hed->blhd", c:get("z", 1), m:weight("W_O", 1))
  T.near((r - c:get("result", 1)):abs():max():item(), 0, 1e-5)
  -- gradients flow to the parameter
  local w = m:param("blocks.0.mixer.Wqkv.weight")
  w.grad = nil
  m:weight("W_V", 0):sum():backward()
  T.eq(w.grad[{ 2 * D, 0 }], 1)
  T.eq(w.grad[{ 0, 0 }], 0)
end)

T.test("weights and names: errors, mixers without heads", function()
  local m = model()
  T.raises(function() m:weight("W_Q", 2) end, "a layer in [0, 2)")
  T.raises(function() m:weight("b_Q", 0) end, "attention has no b_Q")
  T.raises(function() m:weight("W_X", 0) end, "expected W_Q, W_K")
  T.raises(function() m:param("blocks.4.attn.W_Q") end, "the model has 2 layers")
  T.raises(function() m:param("blocks.1.norm1.wieght") end, "did you mean 'backbone.layers.1.norm1.weight'")
  local ok, long = pcall(m.param, m, string.rep("q", 70000))
  T.truthy(not ok and #long < 300 and long:find("(70000 characters)", 1, true), long:sub(1, 300))
  local b = model("based")
  T.raises(function() b:weight("W_Q", 1) end, "layer 1's mixer is based") -- (layer 0: its short convolution)
  local d = model("delta_net") -- no per-head sites: TransformerLens names fall back to the flat ones
  local _, c = d:run_with_cache(tok, { names = "blocks.1.attn.hook_q" })
  T.eq(c:names(), { "blocks.1.mixer.q" })
  T.truthy(rawequal(c:get("q", 1), c["blocks.1.mixer.q"]))
  T.eq(d:site(1, "q"), "blocks.1.mixer.q")
  local nopos = mech.model { d_model = D, n_layers = 1, vocab = V, pos_emb = false }
  T.raises(function() nopos:weight("W_pos") end, "no position table")
end)

T.test("Based's heads: q, k (B, L, H, F), v, z (B, L, H, Dv), reshapes of its flat sites", function()
  local b = model("based")
  local F = b:config().feature_dim
  local _, c = b:run_with_cache(tok)
  T.eq(c:get("q", 1):shape(), { 2, 6, H, F })
  T.eq(c:get("v", 1):shape(), { 2, 6, H, dh })
  T.eq((c:get("z", 1):reshape(2, 6, D) - c["blocks.1.mixer.y"]):abs():max():item(), 0)
  T.eq((c:get("k", 1):reshape(2, 6, H * F) - c["blocks.1.mixer.k"]):abs():max():item(), 0)
  local plain = b:forward(tok)
  T.eq((b:run_with_hooks(tok, { ["blocks.1.attn.hook_q"] = function(x) return x:clone() end }) - plain):abs():max():item(), 0)
  local a = b:run_with_hooks(tok, { ["blocks.1.attn.hook_z"] = function(z) local y = z:clone(); y[{ ":", ":", 1 }] = 0; return y end })
  local e = b:run_with_hooks(tok, { ["blocks.1.mixer.y"] = function(y) local w = y:clone(); w[{ ":", ":", { dh, 2 * dh } }] = 0; return w end })
  T.near((a - e):abs():max():item(), 0, 1e-6)
  T.truthy((a - plain):abs():max():item() > 0)
end)

T.test("patching_map over heads: components = {'z'} gives one row per head, each a manual one-head patch", function()
  local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
  local ds = task:dataset(8, { seed = 1, split = "test" })
  local m = mech.model { d_model = D, n_layers = 2, vocab = task:vocab_size(), n_heads = H, seed = 5 }
  for _, p in ipairs(m:named_parameters()) do -- larger weights: an untrained model's heads differ more
    if p[1]:find("Wqkv") or p[1]:find("word_embeddings") then mech.no_grad(function() p[2]:copy_(p[2] * 8) end) end
  end
  local ic = require "mech.interchange"
  local clean, corr = ic.corrupt(ds, 0, 4)
  local rows, targets = ic.readout(ds, 0, 4)
  local map = mech.interp.patching_map(m, clean, corr, { dataset = ds, components = { "z" }, positions = { 3, 10 }, chance = 0,
    metric = "logit" })
  T.eq(map.values:shape(), { 2 * H, 2 })
  T.eq(map.heads, { 0, 1, 2, 3, 0, 1, 2, 3 })
  T.eq(map.row_labels[6], "layer 1 head 1 mixer.head_z")
  T.eq(map.sites[6], "blocks.1.mixer.head_z")
  local _, cc = m:run_with_cache(clean, { names = "z" })
  local function logit(lg)
    local s = 0
    for b = 0, 3 do s = s + lg:get(b, rows:get(b), targets:get(b)) end
    return s / 4
  end
  local spread = 0 -- the heads' cells differ: a map that patched every head would fail below
  for r = H + 2, 2 * H do spread = math.max(spread, math.abs(map.patched:get(r - 1, 1) - map.patched:get(H, 1))) end
  T.truthy(spread > 1e-3, "spread " .. spread)
  for r = 1, 2 * H do
    local layer, h = (r - 1) // H, map.heads[r]
    for j, pos in ipairs { 3, 10 } do
      local site = "blocks." .. layer .. ".attn.hook_z"
      local lg = m:run_with_hooks(corr, { [site] = function(z)
        local y = z:clone(); y[{ ":", pos, h }] = cc[site][{ ":", pos, h }]; return y end })
      T.near(map.patched:get(r - 1, j - 1), logit(lg), 1e-5, map.row_labels[r] .. " at " .. pos)
    end
  end
end)

T.test("patching_map ablation: zero and mean over heads and whole sites, each a manual hook", function()
  local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
  local ds = task:dataset(8, { seed = 1, split = "test" })
  local m = mech.model { d_model = D, n_layers = 2, vocab = task:vocab_size(), n_heads = H, seed = 5 }
  for _, p in ipairs(m:named_parameters()) do
    if p[1]:find("Wqkv") or p[1]:find("word_embeddings") then mech.no_grad(function() p[2]:copy_(p[2] * 8) end) end
  end
  local clean = ds:batch(0, 4)
  local rows, targets = require("mech.interchange").readout(ds, 0, 4)
  local function logit(lg)
    local s = 0
    for b = 0, 3 do s = s + lg:get(b, rows:get(b), targets:get(b)) end
    return s / 4
  end
  local base = logit(m:forward(clean))
  for _, kind in ipairs { "zero", "mean" } do
    -- (model, clean, opts) and (model, clean, nil, opts) are the same call
    local map = mech.interp.patching_map(m, clean, { dataset = ds, components = { "z", "mlp_output" }, positions = { 3, 10 },
      chance = 0, metric = "logit", ablate = kind })
    local map2 = mech.interp.patching_map(m, clean, nil, { dataset = ds, components = { "z", "mlp_output" },
      positions = { 3, 10 }, chance = 0, metric = "logit", ablate = kind })
    T.eq((map.values - map2.values):abs():max():item(), 0)
    T.eq(map.ablate, kind)
    T.eq(map.heads, { 0, 1, 2, 3, -1, 0, 1, 2, 3, -1 })
    T.near(map.clean, base, 1e-5)
    T.eq(map.den, 1)
    local _, cc = m:run_with_cache(clean, { names = { "z", "mlp_output" } })
    for r = 1, #map.sites do
      local site, h = map.sites[r], map.heads[r]
      local x = cc[site]
      local fill = kind == "zero" and x * 0 or x:mean(0, true):expand(table.unpack(x:shape()))
      for j, pos in ipairs { 3, 10 } do
        local lg = m:run_with_hooks(clean, { [site] = function(a)
          local y = a:clone()
          if h >= 0 then y[{ ":", pos, h }] = fill[{ ":", pos, h }] else y[{ ":", pos }] = fill[{ ":", pos }] end
          return y
        end })
        local v = logit(lg)
        T.near(map.patched:get(r - 1, j - 1), v, 1e-4, kind .. " " .. map.row_labels[r] .. " at " .. pos)
        T.near(map.values:get(r - 1, j - 1), v - base, 1e-4, kind .. " " .. map.row_labels[r] .. " at " .. pos)
      end
    end
    local spread = 0 -- the heads' cells differ: a map that ablated every head would fail above
    for r = 1, H do spread = math.max(spread, math.abs(map.patched:get(r - 1, 0) - map.patched:get(0, 0))) end
    T.truthy(spread > 1e-4, kind .. " spread " .. spread)
  end
  T.raises(function() mech.interp.patching_map(m, clean, clean, { dataset = ds, ablate = "zero" }) end,
    "give corrupted tokens (argument 3) or option 'ablate', not both")
  T.raises(function() mech.interp.patching_map(m, clean, nil, { dataset = ds, ablate = "max" }) end,
    "bad argument #4 to 'mech.interp.patching_map' (option 'ablate': expected 'zero' or 'mean', got 'max')")
end)

T.done()
