-- nn.MLP{d_model =, kind = "mlp" | "glu", hidden = 4·d_model}: the paper's state mixer, as the C
-- model's (src/nn/mlp.c): MLP y = fc2(gelu(fc1 x)); GLU y = fc3(fc1 x ⊙ gelu(fc2 x)). Sites
-- hidden_pre (fc1's output) and hidden_post (what the last projection reads), as mlp.hidden_pre /
-- mlp.hidden_post of a built-in block.
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"
local Linear = require "mech.nn.linear"

local MLP = nn.Module:extend("MLP")

function MLP:init(opts)
  local fn = "mech.nn.MLP"
  opts = C.opts(fn, 1, opts, { "d_model", "kind", "hidden" })
  local D = C.size(fn, "option d_model", opts.d_model)
  local H = opts.hidden and C.size(fn, "option hidden", opts.hidden) or 4 * D
  local kind = opts.kind or "mlp"
  if kind ~= "mlp" and kind ~= "glu" then
    error(string.format("%s: option kind expected \"mlp\" or \"glu\" (a block without a state mixer is nn.Block{state_mixer = \"none\"}), got %s",
      fn, tostring(kind)), 3)
  end
  self.kind = kind
  self.fc1 = Linear(D, H)
  if kind == "glu" then
    self.fc2 = Linear(D, H)
    self.fc3 = Linear(H, D)
  else
    self.fc2 = Linear(H, D)
  end
  self.hidden_pre = nn.HookPoint()
  self.hidden_post = nn.HookPoint()
end

function MLP:forward(x)
  local pre = self.hidden_pre(self.fc1(x))
  if self.kind == "glu" then
    return self.fc3(self.hidden_post(pre * mech.gelu(self.fc2(x))))
  end
  return self.fc2(self.hidden_post(mech.gelu(pre)))
end

return MLP
