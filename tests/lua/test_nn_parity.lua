-- Parity: for every built-in architecture (the C registry, mech.architectures), a language model
-- built by hand from mech.nn layers (embedding, positions, nn.Block around the nn.<Mixer> layer,
-- final LayerNorm, tied head) has the built-in model's parameter names; loaded with its weights,
-- it gives the same logits, the same values at every built-in hook site and the same parameter
-- gradients (<= 1e-6).
local T = require "check"
local nn = mech.nn

local D, V, L, B, NL = 16, 32, 8, 2, 2
local TOL = 1e-6

-- The class of an architecture's layer: generated from the registry, so a missing one fails here.
local function class_of(arch)
  local name = (arch:gsub("^%l", string.upper):gsub("_(%w)", string.upper))
  return nn[name], name
end

-- The hand-built LM. Each mixer layer is told its block index: a hybrid (Based: BaseConv on even
-- layers) and BaseConv (short convs on even layers, long on odd) differ by layer.
local HandLM = nn.Module:extend("ParityLM")
function HandLM:init(arch)
  local Mixer = class_of(arch)
  self:add_module("embed", nn.Embedding(V, D), "backbone.embeddings.word_embeddings")
  self:add_module("pos_embed", nn.Embedding(1024, D), "backbone.embeddings.position_embeddings")
  local blocks = nn.ModuleList()
  for l = 0, NL - 1 do
    blocks:append(nn.Block { d_model = D, mixer = Mixer { d_model = D, layer = l } })
  end
  self:add_module("blocks", blocks, "backbone.layers")
  self:add_module("ln_final", nn.LayerNorm(D), "backbone.ln_f")
end
function HandLM:forward(tokens)
  local n = tokens:shape()[2]
  local r = self.embed(tokens) + self.pos_embed.weight:narrow(0, 0, n)
  for l = 0, #self.blocks - 1 do r = self.blocks[l](r) end
  return mech.linear(self.ln_final(r), self.embed.weight)
end

local function maxdiff(a, b) return (a - b):abs():max():item() end

local tokens = (mech.rand(B, L, { generator = mech.Generator(3) }) * V):int()
local R = mech.randn(B, L, V, { generator = mech.Generator(4) })

T.test("every registered architecture has a layer class", function()
  T.truthy(#mech.architectures >= 7)
  for _, arch in ipairs(mech.architectures) do
    local cls, name = class_of(arch)
    T.truthy(cls, "mech.nn." .. name .. " for " .. arch)
    T.eq(cls.arch, arch)
  end
end)

for _, arch in ipairs(mech.architectures) do
  T.test(arch .. ": names, logits, hook sites and gradients equal the built-in model's", function()
    local ref = mech.model { arch = arch, d_model = D, n_layers = NL, vocab = V, seed = 11 }
    local hand = HandLM(arch)

    -- the parameter names, in order
    local want, got = {}, {}
    for _, np in ipairs(ref:named_parameters()) do want[#want + 1] = np[1] end
    for _, np in ipairs(hand:named_parameters()) do got[#got + 1] = np[1] end
    T.eq(got, want, arch .. " parameter names")

    local sd = {}
    for _, np in ipairs(ref:named_parameters()) do sd[np[1]] = np[2] end
    hand:load_state_dict(sd)

    -- logits
    local lr, lh = ref:forward(tokens), hand(tokens)
    T.eq(lh:shape(), lr:shape())
    T.truthy(maxdiff(lr, lh) <= TOL, arch .. " logits differ by " .. maxdiff(lr, lh))

    -- every built-in hook site (the six of each block, the mixer's and the MLP's)
    local _, cr = ref:run_with_cache(tokens)
    local _, ch = hand:run_with_cache(tokens)
    local n = 0
    for _, s in ipairs(ref:hook_names()) do
      local a, b = cr[s.name], ch[s.name]
      T.truthy(b, arch .. ": the hand-built model has no site " .. s.name)
      T.truthy(maxdiff(a, b) <= TOL, arch .. " site " .. s.name .. " differs by " .. maxdiff(a, b))
      n = n + 1
    end
    T.truthy(n >= 2 * 5, arch .. " sites compared: " .. n)

    -- gradients of one loss through both
    ref:zero_grad()
    hand:zero_grad()
    local gl = (ref:forward(tokens) * R):sum()
    gl:backward()
    local hl = (hand(tokens) * R):sum()
    hl:backward()
    local hp = {}
    for _, np in ipairs(hand:named_parameters()) do hp[np[1]] = np[2] end
    for _, np in ipairs(ref:named_parameters()) do
      local g1, g2 = np[2].grad, hp[np[1]].grad
      -- a parameter the forward does not use (Hyena's filter_fn.bias) gets no gradient here and
      -- zeros in the built-in model's flat buffer
      g2 = g2 or mech.zeros(g1:shape())
      local scale = math.max(1, g1:abs():max():item())
      T.truthy(maxdiff(g1, g2) <= TOL * scale, arch .. " gradient of " .. np[1] .. " differs by " .. maxdiff(g1, g2))
    end
  end)
end

T.test("a Mamba LM's blocks are MambaBlocks (RMSNorm, no state mixer)", function()
  local b = nn.Block { d_model = D, mixer = nn.Mamba { d_model = D } }
  T.eq(b.kind, "mamba")
  T.eq(b:named_parameters()[1][1], "norm.weight")
  T.falsy(b.mlp)
end)

T.done()
