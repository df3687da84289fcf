-- The normalisations over the last dim: nn.LayerNorm(D[, {eps = 1e-5, bias = true}]) and
-- nn.RMSNorm(D[, {eps = 1e-5}]) (Mamba's), the kernels of mech.layer_norm / mech.rms_norm.
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"

local LayerNorm = nn.Module:extend("LayerNorm")

function LayerNorm:init(d, opts)
  local fn = "mech.nn.LayerNorm"
  d = C.size(fn, "argument 1 (normalized_shape)", d)
  opts = C.opts(fn, 2, opts, { "eps", "bias" })
  self.eps = C.number(fn, "option eps", opts.eps, 1e-5)
  self.weight = self:param("weight", { d }, { init = "ones" })
  if opts.bias ~= false then self.bias = self:param("bias", { d }, { init = "zeros" }) end
end

function LayerNorm:forward(x) return mech.layer_norm(x, self.weight, self.bias, self.eps) end

local RMSNorm = nn.Module:extend("RMSNorm")

function RMSNorm:init(d, opts)
  local fn = "mech.nn.RMSNorm"
  d = C.size(fn, "argument 1 (normalized_shape)", d)
  opts = C.opts(fn, 2, opts, { "eps" })
  self.eps = C.number(fn, "option eps", opts.eps, 1e-5)
  self.weight = self:param("weight", { d }, { init = "ones" })
end

function RMSNorm:forward(x) return mech.rms_norm(x, self.weight, self.eps) end

return { LayerNorm = LayerNorm, RMSNorm = RMSNorm }
