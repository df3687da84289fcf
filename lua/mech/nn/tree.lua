-- A language model (mech.Model, built-in mixer or one written in Lua) as a mech.nn tree: the
-- methods model:module(), children(), named_children(), modules(), parameters(), tree(), train()
-- and eval() (src/lua/model.c forwards them here).
--
-- The tree is the hand-built LM of docs/nn.md: embed, pos_embed, blocks (nn.Block around the
-- model's own mixer of each block), ln_final and, untied, unembed. Its modules hold the model's
-- parameter tensors (a write through one is a write to the model; optimizers over either see the
-- same leaves) and compute what the model computes, so a piece runs on its own
-- (`model:module().blocks[1].mixer(x)`) and the tree's forward equals model:forward.
local nn = require "mech.nn"
local mixers = require "mech.nn.mixers"

local M = {}

local LM = nn.Module:extend("LM")

function LM:forward(tokens)
  local n = tokens:shape()[2]
  local r = self.embed(tokens)
  if self.pos_embed then r = r + self.pos_embed.weight:narrow(0, 0, n) end
  for l = 0, #self.blocks - 1 do r = self.blocks[l](r) end
  local h = self.ln_final(r)
  if self.unembed then return self.unembed(h) end
  return mech.linear(h, self.embed.weight) -- the tied head
end

local trees = setmetatable({}, { __mode = "k" }) -- model -> its tree, built once

local function build(model)
  local cfg = model:config()
  local D, V = cfg.d_model, cfg.vocab
  local lm = LM()
  lm:add_module("embed", nn.Embedding(V, D), "backbone.embeddings.word_embeddings")
  if cfg.pos_emb then
    lm:add_module("pos_embed", nn.Embedding(cfg.max_pos, D), "backbone.embeddings.position_embeddings")
  end
  local blocks = nn.ModuleList()
  for l = 0, cfg.n_layers - 1 do
    local mixer = mixers.view(model, l)
    blocks:append(nn.Block { d_model = D, mixer = mixer, state_mixer = not mixer.mamba_block and cfg.state_mixer or nil })
  end
  lm:add_module("blocks", blocks, "backbone.layers")
  lm:add_module("ln_final", nn.LayerNorm(D), "backbone.ln_f")
  if not cfg.tie_embeddings then lm:add_module("unembed", nn.Linear(D, V, { bias = false }), "lm_head") end

  -- every parameter the tree made for itself becomes the model's tensor (the mixers' already are)
  local own = {}
  for _, np in ipairs(model:named_parameters()) do own[np[1]] = np[2] end
  local names = lm:named_parameters()
  for _, np in ipairs(names) do
    local t = own[np[1]]
    if not t then
      error(string.format("model:module: the tree's parameter '%s' is not one of the model's (%s)", np[1], cfg.arch), 0)
    end
    if not np[1]:find(".sequence_mixer.", 1, true) then lm:set_parameter(np[1], t) end
  end
  if #names ~= #model:named_parameters() then
    error(string.format("model:module: the tree has %d parameters, the model %d", #names, #model:named_parameters()), 0)
  end
  return lm
end

function M.module(model)
  local lm = trees[model]
  if not lm then
    lm = build(model)
    trees[model] = lm
  end
  return lm
end

function M.children(model) return M.module(model):children() end
function M.named_children(model) return M.module(model):named_children() end
function M.modules(model) return M.module(model):modules() end
function M.tree(model) return tostring(M.module(model)) end

function M.parameters(model)
  local out = {}
  for _, np in ipairs(model:named_parameters()) do out[#out + 1] = np[2] end
  return out
end

-- No layer of the paper's models behaves differently in training (no dropout): the flag is kept
-- on the tree for modules of one's own that read it.
function M.train(model, on)
  M.module(model):train(on)
  return model
end
function M.eval(model) return M.train(model, false) end

return M
