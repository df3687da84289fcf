-- Path patching (issue 29, item 3): against a manual two-pass patch with run_with_hooks.
local T = require "check"

local V, D, H = 24, 16, 4
local m = mech.model { d_model = D, n_layers = 3, vocab = V, n_heads = H, seed = 7 }
for _, p in ipairs(m:named_parameters()) do -- larger weights: effects well above rounding
  if p[1]:find("Wqkv") or p[1]:find("out_proj.weight") or p[1]:find("word_embeddings") then
    mech.no_grad(function() p[2]:copy_(p[2] * 6) end)
  end
end
local clean = mech.tensor({ { 1, 5, 9, 2, 7, 3, 11, 4 }, { 8, 2, 6, 10, 1, 12, 5, 9 } }, { dtype = "int32" })
local corr = mech.tensor({ { 1, 6, 9, 2, 13, 3, 11, 4 }, { 8, 3, 6, 14, 1, 12, 5, 9 } }, { dtype = "int32" })
local _, cc = m:run_with_cache(clean)
local _, kc = m:run_with_cache(corr)

local function slice(act, src, h)
  if h == nil then return src end
  local y = act:clone()
  y[{ ":", ":", h }] = src[{ ":", ":", h }]
  return y
end

-- The standard algorithm by hand: pass 1 records the receiver with the sender corrupted and every
-- other writer frozen; pass 2 patches only the receiver. own: the writer that carries the sender.
local function manual(sender, sh, receiver, rh, own)
  local hooks, rec = {}, nil
  for l = 0, 2 do
    for _, w in ipairs { "attention_output", "mlp_output" } do
      local name = "blocks." .. l .. "." .. w
      if name ~= own and name ~= receiver then hooks[name] = function() return cc[name] end end
    end
  end
  hooks[sender] = function(x) return slice(x, kc[sender], sh) end
  hooks[receiver] = function(x) rec = x:clone(); return nil end
  m:run_with_hooks(clean, hooks)
  return m:run_with_hooks(clean, { [receiver] = function(x) return slice(x, rec, rh) end })
end

T.test("path patching equals the manual two-pass patch (heads, MLPs, same-layer receivers)", function()
  local plain = m:forward(clean)
  local cases = {
    { "blocks.0.mixer.head_z", 1, "blocks.1.mixer.head_q", 2, "blocks.0.attention_output" },
    { "blocks.0.mixer.head_result", 3, "blocks.2.mixer.head_k", 0, "blocks.0.attention_output" },
    { "blocks.0.mlp_output", nil, "blocks.2.attention_input", nil, "blocks.0.mlp_output" },
    { "blocks.1.attention_output", nil, "blocks.1.mlp_input", nil, "blocks.1.attention_output" },
  }
  for _, c in ipairs(cases) do
    local label = c[1] .. " -> " .. c[3]
    local got = mech.interp.path_patch(m, clean, corr, { sender = c[1], sender_head = c[2], receiver = c[3], receiver_head = c[4] })
    local want = manual(c[1], c[2], c[3], c[4], c[5])
    T.near((got - want):abs():max():item(), 0, 1e-5, label)
    T.truthy((got - plain):abs():max():item() > 1e-3, label .. ": the patch changed the output")
  end
  -- TransformerLens names work, and a frozen path is not a full patch: patching the sender outright differs
  local tl = mech.interp.path_patch(m, clean, corr, { sender = "blocks.0.hook_mlp_out", receiver = "blocks.2.hook_resid_pre" })
  local direct = manual("blocks.0.mlp_output", nil, "blocks.2.block_input", nil, "blocks.0.mlp_output")
  T.near((tl - direct):abs():max():item(), 0, 1e-5)
  local full = mech.interp.patch(m, clean, { site = "blocks.0.mlp_output", source = kc["blocks.0.mlp_output"] })
  T.truthy((tl - full):abs():max():item() > 1e-4, "the indirect paths were frozen")
end)

T.test("path_patch: errors", function()
  local function pp(o) return function() mech.interp.path_patch(m, clean, corr, o) end end
  T.raises(pp { receiver = "blocks.1.block_input" }, "option 'sender' (a site name) is required")
  T.raises(pp { sender = "blocks.1.mlp_output", receiver = "blocks.0.block_input" }, "after the sender")
  T.raises(pp { sender = "blocks.0.block_input", receiver = "blocks.1.block_input" }, "the sender must be inside a mixer")
  T.raises(pp { sender = "blocks.0.mlp_output", sender_head = 1, receiver = "blocks.1.block_input" }, "needs a per-head site")
  T.raises(pp { sender = "blocks.0.attn.hook_z", sender_head = 9, receiver = "blocks.1.block_input" }, "a head in [0, 4)")
  T.raises(pp { sender = "blocks.0.hook_z", receiver = "blocks.1.block_input" }, "did you mean")
  T.raises(pp { sender = "blocks.0.attn.hook_z", receiver = "blocks.5.block_input" }, "the model has 3 layers")
  T.raises(function() mech.interp.path_patch(m, clean, clean:narrow(1, 0, 4), { sender = "a", receiver = "b" }) end, "shape")
end)

T.done()
