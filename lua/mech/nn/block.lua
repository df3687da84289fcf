-- nn.Block{d_model =, mixer =, kind =, state_mixer = "mlp"}: the paper's blocks around a sequence
-- mixer (src/nn/model.c, block_resume), with the sites of a built-in block (the six, and resid_mid
-- before norm2 where there is an MLP):
--   TransformerBlock: r = r + mixer(LN1(r)); r = r + MLP(LN2(r))   (state_mixer "none": + LN2(r))
--   MambaBlock:       r = r + mixer(RMSNorm(r))
-- Parameters are named as the built-in state dicts (norm1, sequence_mixer, norm2, state_mixer;
-- norm for a MambaBlock) and hook sites as its hook names (mixer, mlp, block_input, ...).
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"
local norm = require "mech.nn.norm"
local MLP = require "mech.nn.mlp"

local Block = nn.Module:extend("Block")

function Block:init(opts)
  local fn = "mech.nn.Block"
  opts = C.opts(fn, 1, opts, { "d_model", "mixer", "kind", "state_mixer" })
  local D = C.size(fn, "option d_model", opts.d_model)
  local mixer = opts.mixer
  if nn.is_module(mixer) then -- an instance
  elseif type(mixer) == "table" and rawget(mixer, "__nnclass") then
    mixer = mixer { d_model = D }
  else
    error(fn .. ": option mixer expected a module or a module class (nn.Attention, your own), got " .. type(mixer), 3)
  end
  local kind = opts.kind or (mixer.mamba_block and "mamba" or "transformer")
  if kind ~= "transformer" and kind ~= "mamba" then
    error(fn .. ": option kind expected \"transformer\" or \"mamba\", got " .. tostring(kind), 3)
  end
  local sm = opts.state_mixer or "mlp"
  if type(sm) == "table" and rawget(sm, "__nnclass") then sm = sm { d_model = D } end
  if not nn.is_module(sm) and sm ~= "mlp" and sm ~= "glu" and sm ~= "none" then
    error(fn .. ": option state_mixer expected \"mlp\", \"glu\", \"none\" or a module (your own state mixer), got " .. tostring(sm), 3)
  end
  if kind == "mamba" and opts.state_mixer and sm ~= "none" then
    error(fn .. ": a mamba block has no state mixer (option state_mixer must be \"none\" or absent)", 3)
  end
  self.kind = kind
  self.block_input = nn.HookPoint()
  self.attention_input = nn.HookPoint()
  if kind == "mamba" then
    self:add_module("norm", norm.RMSNorm(D))
    self:add_module("mixer", mixer, "sequence_mixer")
    self.attention_output = nn.HookPoint()
  else
    self:add_module("norm1", norm.LayerNorm(D))
    self:add_module("mixer", mixer, "sequence_mixer")
    self.attention_output = nn.HookPoint()
    if sm ~= "none" then self.resid_mid = nn.HookPoint() end -- as TransformerLens: only with an MLP
    self:add_module("norm2", norm.LayerNorm(D))
    if sm ~= "none" then
      self.mlp_input = nn.HookPoint()
      self:add_module("mlp", nn.is_module(sm) and sm or MLP { d_model = D, kind = sm }, "state_mixer")
      self.mlp_output = nn.HookPoint()
    end
  end
  self.block_output = nn.HookPoint()
end

-- A mixer's contract: its output has its input's shape and dtype. Checked here, before the
-- residual sum, because a (1, 1) tensor or a (B, 1, D) one would broadcast into it silently.
-- An error raised inside the module gets the same prefix, so that it too names layer and class
-- (unless mech.nn's own message names them already).
local function mixed(mixer, x)
  local cls = rawget(getmetatable(mixer), "__name") or "Module"
  local ok, y = pcall(mixer, x)
  if not ok then
    if type(y) == "string" and y:find(nn.where(mixer), 1, true) then error(y, 0) end
    local msg = type(y) == "string" and y or string.format("raised %s as its error (not a message)",
      y == nil and "nil" or ("a " .. type(y)))
    error(string.format("mech.nn: %s (%s): %s", mixer:path() ~= "" and mixer:path() or "mixer", cls, msg), 0)
  end
  local ys = mech.is_tensor(y) and y:shape()
  local xs = x:shape()
  local same = ys and #ys == #xs and y:dtype() == x:dtype()
  for d = 1, same and #xs or 0 do same = same and ys[d] == xs[d] end
  if not same then
    local got = ys and string.format("%s %s tensor of shape [%s]", y:dtype():match("^[aeiou]") and "an" or "a", y:dtype(),
      table.concat(ys, ",")) or
      (y == nil and "nil" or ("a " .. type(y)))
    error(string.format("mech.nn: %s (%s): forward returned %s, expected a %s tensor of shape [%s] (its input's)",
      mixer:path() ~= "" and mixer:path() or "mixer", cls, got, x:dtype(), table.concat(xs, ",")), 0)
  end
  return y
end

function Block:forward(r)
  r = self.block_input(r)
  if self.kind == "mamba" then
    r = r + self.attention_output(mixed(self.mixer, self.attention_input(self.norm(r))))
    return self.block_output(r)
  end
  r = r + self.attention_output(mixed(self.mixer, self.attention_input(self.norm1(r))))
  if self.resid_mid then r = self.resid_mid(r) end
  local c = self.norm2(r)
  if self.mlp then c = self.mlp_output(mixed(self.mlp, self.mlp_input(c))) end
  return self.block_output(r + c)
end

return Block
