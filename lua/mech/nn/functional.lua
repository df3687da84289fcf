-- Functions of mech.nn that are not layers.
local core = require "mech.nn.core"

local F = {}

--- nn.cross_entropy(logits, targets) -> mean loss: logits (N, V) or (B, L, V) against int32
--- targets (N) or (B, L); targets -100 are ignored (F.cross_entropy's ignore_index). The fused
--- kernel of the built-in models' loss.
function F.cross_entropy(logits, targets)
  if mech.is_tensor(logits) and logits:dim() == 3 then
    local s = logits:shape()
    logits = logits:reshape(s[1] * s[2], s[3])
    if mech.is_tensor(targets) and targets:dim() == 2 then targets = targets:reshape(s[1] * s[2]) end
  end
  return core.cross_entropy(logits, targets)
end

return F
