-- A language model as a mech.nn tree (lua/mech/nn/tree.lua): model:module(), children(), tree(),
-- parameters(), train()/eval(). The tree holds the model's own tensors and computes its forward.
local T = require "check"
local Gate = require "mixer_gate" -- a mixer written in Lua (tests/lua/mixer_gate.lua)

local V, D = 32, 16
local tokens = (mech.rand(2, 8, { generator = mech.Generator(5) }) * V):int()
local function max_diff(a, b) return (a - b):abs():max():item() end

local function names(list)
  local out = {}
  for _, np in ipairs(list) do out[#out + 1] = np[1] end
  return out
end

for _, arch in ipairs(mech.architectures) do
  T.test(arch .. ": the tree's parameters are the model's, in order, and its forward is the model's", function()
    local m = mech.model { arch = arch, d_model = D, n_layers = 2, vocab = V, seed = 7 }
    local lm = m:module()
    T.eq(names(lm:named_parameters()), names(m:named_parameters()))
    T.eq(#m:parameters(), #m:named_parameters())
    T.eq(lm:num_params(), m:n_params())
    T.truthy(max_diff(lm(tokens), m:forward(tokens)) == 0, arch .. " tree forward differs")
    T.truthy(rawequal(m:module(), lm), "the tree is built once per model")
  end)
end

T.test("writes through the tree reach the model; one optimizer step over either moves the same leaves", function()
  local m = mech.model { arch = "attention", d_model = D, n_layers = 2, vocab = V, seed = 7 }
  local before = m:forward(tokens)
  mech.no_grad(function() m:module().blocks[1].norm1.weight:fill_(0.5) end)
  T.truthy(max_diff(m:forward(tokens), before) > 1e-3, "a write to the tree's LayerNorm weight must change the model")
  T.truthy(max_diff(m:module()(tokens), m:forward(tokens)) == 0)
  local opt = mech.optim.sgd(m:module(), { lr = 0.1 })
  local loss = m:module()(tokens):pow(2):mean()
  loss:backward()
  local w = m:param("backbone.layers.0.norm1.weight"):clone()
  opt:step()
  T.truthy(max_diff(w, m:param("backbone.layers.0.norm1.weight")) > 0, "the step must move the model's own leaf")
end)

T.test("children, tree printing, hooks on the tree, train/eval", function()
  local m = mech.model { arch = "mamba", d_model = D, n_layers = 2, vocab = V, tie_embeddings = false }
  local kids = names(m:named_children())
  T.eq(kids, { "embed", "pos_embed", "blocks", "ln_final", "unembed" })
  T.eq(#m:children(), 5)
  local text = m:tree()
  T.truthy(text:find("mixer: Mamba", 1, true), text)
  T.truthy(text:find("unembed: Linear", 1, true), text)
  local count = tostring(m:n_params()):reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
  T.truthy(text:find("LM  (" .. count .. " parameters)", 1, true), text:match("^[^\n]*"))
  -- the tree's sites carry the model's names: its cache equals the model's at the block sites
  local _, ct = m:module():run_with_cache(tokens)
  local _, cm = m:run_with_cache(tokens)
  local inner
  for _, s in ipairs(m:hook_names()) do
    if s.layer == 1 and s.component:sub(1, 6) == "mixer." then inner = inner or s.name end
  end
  for _, site in ipairs { "blocks.0.block_input", "blocks.1.attention_output", inner } do
    T.truthy(ct[site], "the tree has no site " .. site)
    T.truthy(max_diff(ct[site], cm[site]) == 0, site)
  end
  T.eq(m:eval(), m)
  T.eq(m:module().training, false)
  T.eq(m:module().blocks[0].mixer.training, false)
  m:train()
  T.eq(m:module().training, true)
end)

T.test("a model whose mixer is written in Lua has the same tree", function()
  local m = mech.model { mixer = Gate, d_model = D, n_layers = 2, vocab = V, seed = 3 }
  local lm = m:module()
  T.eq(names(lm:named_parameters()), names(m:named_parameters()))
  T.truthy(max_diff(lm(tokens), m:forward(tokens)) == 0)
  T.truthy(m:tree():find("mixer: MixerView", 1, true))
  T.raises(function() mech.nn.registry.MixerView {} end, "made by")
  T.raises(function() getmetatable(m).__index.children(5) end, "calling 'model:children' on bad self (a mech.Model expected, got 5)")
end)

T.done()
