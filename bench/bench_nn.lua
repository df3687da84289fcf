-- A Transformer built by hand from mech.nn layers against the built-in one: CPU milliseconds per
-- training step on the paper's AR setting (ar_32: D = 64, 2 layers, batch 32, L = 37, V = 8196),
-- one thread, side by side in one run. Both compute logits only at the supervised rows and take
-- one AdamW step. Prints numbers and asserts nothing (the machine may be busy).
--   build/mechlab bench/bench_nn.lua [steps=20]
local nn = mech.nn

local S = dofile(mech.find("bench/ar_setting.lua"))(arg, "bench_nn.lua")
local D, NL, B, V, ds = S.D, S.NL, S.B, S.V, S.ds

-- The hand-built LM: the built-in model's state-dict names, so it loads the same weights.
local LM = nn.Module:extend("BenchLM")
function LM:init()
  self:add_module("embed", nn.Embedding(V, D), "backbone.embeddings.word_embeddings")
  self:add_module("pos_embed", nn.Embedding(1024, D), "backbone.embeddings.position_embeddings")
  local blocks = nn.ModuleList()
  for _ = 1, NL do blocks:append(nn.Block { d_model = D, mixer = nn.Attention { d_model = D } }) end
  self:add_module("blocks", blocks, "backbone.layers")
  self:add_module("ln_final", nn.LayerNorm(D), "backbone.ln_f")
end
-- Mean cross-entropy at the rows whose target is not -100 (rows: flat indices, labels (N)), with
-- the fused kernel the built-in loss uses (nn.cross_entropy).
function LM:loss(tokens, rows, labels)
  local L = tokens:shape()[2]
  local r = self.embed(tokens) + self.pos_embed.weight:narrow(0, 0, L)
  for l = 0, #self.blocks - 1 do r = self.blocks[l](r) end
  local h = self.ln_final(r):reshape(B * L, D):index_select(0, rows)
  local logits = mech.linear(h, self.embed.weight)
  return nn.cross_entropy(logits, labels)
end

local function supervised(targets)
  local rows, labels = {}, {}
  local L = targets:shape()[2]
  for b, row in ipairs(targets:tolist()) do
    for t, v in ipairs(row) do
      if v ~= -100 then rows[#rows + 1], labels[#labels + 1] = (b - 1) * L + t - 1, v end
    end
  end
  return mech.tensor(rows, { dtype = "int32" }), mech.tensor(labels, { dtype = "int32" })
end

local builtin = mech.model { arch = "attention", d_model = D, n_layers = NL, vocab = V, seed = 1 }
local hand = LM()
local sd = {}
for _, np in ipairs(builtin:named_parameters()) do sd[np[1]] = np[2] end
hand:load_state_dict(sd)
local b_opt = mech.adamw(builtin)
local h_opt = mech.optim.adamw(hand, { lr = 1e-3 })

local function builtin_step(i)
  local tokens, targets = ds:batch(B * (i % 64), B)
  return builtin:train_step(b_opt, tokens, targets, 1e-3).loss
end
local function hand_step(i)
  local tokens, targets = ds:batch(B * (i % 64), B)
  local rows, labels = supervised(targets)
  h_opt:zero_grad()
  local loss = hand:loss(tokens, rows, labels)
  loss:backward()
  h_opt:step()
  return loss:item()
end

-- the same weights and batch give the same first loss
local l1, l2 = builtin_step(0), hand_step(0)
print(string.format("first step loss: built-in %.6f, hand-built %.6f", l1, l2))

-- alternate to share the machine's noise fairly
local tb, th = {}, {}
for r = 1, 2 do
  tb[r], th[r] = S.ms_per_step(builtin_step), S.ms_per_step(hand_step)
end
local b_ms, h_ms = math.min(tb[1], tb[2]), math.min(th[1], th[2])
print(string.format("D=%d B=%d L=37 V=%d, 1 thread, %d steps: built-in %.2f ms/step, hand-built (mech.nn) %.2f ms/step, ratio %.2fx",
  D, B, V, S.steps, b_ms, h_ms, h_ms / b_ms))
